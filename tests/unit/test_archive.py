"""policy/archive.py: the continuous archive's status from the primary's answer, and when it is an alarm."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dataclasses import replace

from mydb_operator.model.instances import InstanceFacts, Standby, parse_history
from mydb_operator.policy.archive import STALL_SECONDS, archive_health, archive_status
from mydb_operator.status.warnings import archive_fork_warnings

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def primary(*standbys: Standby, slot: str | None = "reserved", lsn: int = 0x3000100) -> InstanceFacts:
    return InstanceFacts(pod="db-0", in_recovery=False, timeline=1, wal_lsn=lsn, standbys=standbys, archive_slot=slot)


def archive(flush: int = 0x3000000, age: float = 2.0, state: str = "streaming") -> Standby:
    return Standby("mydb-archive", state, "async", flush, None, age)


def test_a_streaming_archive_reports_its_position_and_its_lag_and_nothing_that_ticks():
    status = archive_status(primary(archive(), Standby("db-1", "streaming", "async", 0x3000100, 0x3000100, 1.0)),
                            {}, NOW)
    assert status == {"streaming": True, "archivedWAL": "0/3000000", "lagBytes": 0x100, "slot": "reserved",
                      "since": "2026-12-03T12:00:00Z", "timeline": 1}
    later = archive_status(primary(archive()), status, NOW + timedelta(minutes=5))
    assert later == status  # an idle database: nothing that ticks


def test_an_archive_that_stopped_replying_is_stalled_since_its_last_reply_and_one_gone_since_first_seen_so():
    silent = archive_status(primary(archive(age=45.0)), {}, NOW)
    assert silent["streaming"] is False and silent["stalledSince"] == "2026-12-03T11:59:15Z"  # its last reply
    gone = archive_status(primary(), {"archivedWAL": "0/2000000", "stalledSince": "2026-12-03T11:59:00Z",
                                      "since": "2026-12-01T00:00:00Z"}, NOW)
    assert gone == {"streaming": False, "archivedWAL": "0/2000000", "slot": "reserved",
                    "stalledSince": "2026-12-03T11:59:00Z", "since": "2026-12-01T00:00:00Z"}


def test_a_stall_is_an_alarm_after_stall_seconds_with_a_message_that_stays_the_same():
    since = {"streaming": False, "stalledSince": "2026-12-03T12:00:00Z"}
    assert archive_health("db", since, NOW + timedelta(seconds=STALL_SECONDS - 1)) is None
    healthy, reason, message = archive_health("db", since, NOW + timedelta(seconds=STALL_SECONDS))
    assert (healthy, reason) == (False, "ArchiveStalled")
    assert "since 2026-12-03T12:00:00Z" in message and "db-wal-0" in message
    assert archive_health("db", since, NOW + timedelta(hours=1)) == (healthy, reason, message)
    assert archive_health("db", {"streaming": True, "slot": "reserved"}, NOW) is None


def test_an_unreserved_slot_warns_before_the_gap():
    healthy, reason, message = archive_health("db", {"streaming": True, "slot": "unreserved"}, NOW)
    assert (healthy, reason) == (False, "ArchiveFallingBehind") and "backup.maxRetainedWal" in message


def test_a_lost_slot_says_the_archive_has_a_gap():
    healthy, reason, message = archive_health("db", {"streaming": True, "slot": "lost"}, NOW)
    assert (healthy, reason) == (False, "ArchiveBroken") and "new base backup" in message


def job(name: str, kind: str | None, label: str = "verify") -> dict:
    conditions = [{"type": kind, "status": "True", "lastTransitionTime": "2026-12-03T12:00:00Z"}] if kind else []
    return {"metadata": {"name": name, "labels": {"myapp.example.com/backup": label}},
            "status": {"conditions": conditions}}


def test_a_verification_is_running_then_succeeded_or_failed_and_kept_once_its_job_is_gone():
    from mydb_operator.policy.backups import verification
    assert verification([job("db-verify-1", None)], "db-verify-1", {}) == {"job": "db-verify-1", "result": "Running"}
    done = verification([job("db-verify-1", "Complete")], "db-verify-1", {})
    assert done == {"job": "db-verify-1", "result": "Succeeded", "finishedAt": "2026-12-03T12:00:00Z"}
    assert verification([], "db-verify-1", done) == done
    assert verification([job("db-verify-2", "Failed")], "db-verify-2", done)["result"] == "Failed"
    assert verification([], None, {}) == {}


def test_a_failed_verification_is_no_failed_backup_but_makes_backups_unhealthy():
    from mydb_operator.policy.backups import facts, health
    seen = facts({"status": {"lastSuccessfulTime": "2026-12-03T02:00:00Z"}}, [job("db-verify-2", "Failed")])
    assert "lastFailedJob" not in seen
    assert health(seen)[:2] == (True, "BackupSucceeded")
    failed = {**seen, "lastVerification": {"job": "db-verify-2", "result": "Failed", "finishedAt": "2026-12-03T12:00:00Z"}}
    healthy, reason, message = health(failed)
    assert (healthy, reason) == (False, "VerificationFailed") and "db-verify-2" in message


def test_base_backups_are_the_successes_since_the_archive_kept_as_prune_sh_keeps_them():
    """A success from before the archive existed (a dump-only chart) is no base backup; older than the retention
    goes, the newest stays; the window starts at the oldest kept."""
    from mydb_operator.policy.archive import base_backups
    since = "2026-12-01T00:00:00Z"
    assert base_backups([], "2026-11-30T02:00:00Z", since, "7d", NOW) == []
    first = base_backups([], "2026-12-01T00:05:00Z", since, "7d", NOW)
    assert first == ["2026-12-01T00:05:00Z"]
    assert base_backups(first, "2026-12-01T00:05:00Z", since, "7d", NOW) == first  # the same success again
    two = base_backups(first, "2026-12-02T02:00:00Z", since, "7d", NOW)
    assert two == ["2026-12-01T00:05:00Z", "2026-12-02T02:00:00Z"]
    assert base_backups(two, "2026-12-02T02:00:00Z", since, "1d", NOW) == ["2026-12-02T02:00:00Z"]
    assert base_backups(two, "2026-12-02T02:00:00Z", since, "1h", NOW + timedelta(days=30)) == [
        "2026-12-02T02:00:00Z"]  # the newest, however old


def test_a_retention_longer_than_the_calendar_keeps_every_base_backup():
    """9999999w is a retention the CRD takes; its cutoff lies before the year 1, where a datetime cannot go.
    prune.sh's arithmetic keeps everything; so does the status (no OverflowError in the pass)."""
    from mydb_operator.policy.archive import base_backups
    known = ["2001-01-01T00:00:00Z", "2026-12-02T02:00:00Z"]
    assert base_backups(known, None, None, "9999999w", NOW) == known


def test_the_newest_base_backup_older_than_the_retention_is_kept_the_window_reaches_back_all_of_it():
    """Every backup tool keeps the newest base backup from before the retention's start: a recovery to a moment
    early in the window starts from it. Only those older than it go (prune.sh does the same)."""
    from mydb_operator.policy.archive import base_backups
    since, now = "2026-11-01T00:00:00Z", datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
    known = ["2026-12-01T02:00:00Z", "2026-12-02T02:00:00Z", "2026-12-04T02:00:00Z", "2026-12-09T02:00:00Z"]
    kept = base_backups(known, None, since, "7d", now)  # the window starts on 2026-12-03T12:00
    assert kept == ["2026-12-02T02:00:00Z", "2026-12-04T02:00:00Z", "2026-12-09T02:00:00Z"]


HISTORY = "1\t0/3000000\tno recovery target specified\n\n2\t0/483EFF60\tno recovery target specified\n"


def test_a_history_file_gives_where_each_earlier_timeline_ended():
    assert parse_history(HISTORY) == {1: 0x3000000, 2: 0x483EFF60}
    assert parse_history("# a comment\nnot a line\n3 nonsense reason\n") == {}
    assert parse_history(None) == {}


def promoted(timeline: int = 3, *standbys: Standby) -> InstanceFacts:
    """A new primary on TIMELINE, whose history says timeline 2 ended at 0/483EFF60."""
    return replace(primary(*standbys), timeline=timeline, switchpoints=tuple(parse_history(HISTORY).items()))


def test_a_fork_behind_the_archives_position_is_reported_once_with_the_range_the_failover_lost():
    before = {"streaming": True, "archivedWAL": "0/80000000", "timeline": 2, "since": "2026-12-01T00:00:00Z"}
    # The operator read 0/89000000 from the old primary after the last status it wrote: the fresher figure counts.
    after = archive_status(promoted(), before, NOW, {1: 0x2000000, 2: 0x89000000})
    fork = {"timeline": 2, "from": "0/483EFF60", "to": "0/89000000", "bytes": 0x89000000 - 0x483EFF60,
            "keptIn": "diverged-wal/*-tl2"}
    assert after["diverged"] == [fork] and after["timeline"] == 2
    again = archive_status(promoted(), after, NOW, {2: 0x89000000})
    assert again["diverged"] == [fork]  # once, however many passes see it
    streaming = archive_status(promoted(3, archive(0x90000000)), again, NOW, {2: 0x89000000, 3: 0x90000000})
    assert streaming["timeline"] == 3 and streaming["diverged"] == [fork]  # kept in status from then on
    warnings = archive_fork_warnings({"backup": {"archive": before}}, {"backup": {"archive": after}})
    assert [reason for _, reason, _ in warnings] == ["ArchiveKeptDivergedWAL"]
    assert "timeline 2 (from 0/483EFF60 to at least 0/89000000)" in warnings[0][2]
    assert archive_fork_warnings({"backup": {"archive": after}}, {"backup": {"archive": again}}) == []


def test_a_fork_at_or_past_the_archives_position_loses_nothing_and_reports_nothing():
    # A switchover: the archive had everything up to the fork (the new timeline's first WAL), not past it.
    at_fork = {"archivedWAL": "0/483EFF60", "timeline": 2}
    assert "diverged" not in archive_status(promoted(), at_fork, NOW, {2: 0x483EFF60})
    # An archive position from before this code knew the timeline, or on the current timeline: nothing to say.
    assert "diverged" not in archive_status(promoted(), {"archivedWAL": "0/89000000"}, NOW)
    assert "diverged" not in archive_status(promoted(), {"archivedWAL": "0/89000000", "timeline": 3}, NOW)


def test_the_archive_position_kept_per_timeline_is_the_highest_seen_of_the_newest_three():
    from datetime import datetime as dt

    from mydb_operator.model.sighting import Sighting, archived_by_timeline

    def seen(timeline: int, flush: int | None) -> Sighting:
        streaming = {"db-1": 5} | ({"mydb-archive": flush} if flush is not None else {})
        return Sighting("db-0", dt(2026, 12, 7, tzinfo=UTC), 0, timeline, streaming)

    known = archived_by_timeline({}, seen(1, 0x100))
    assert archived_by_timeline(known, seen(1, 0x80)) == {1: 0x100}  # never lower
    assert archived_by_timeline(known, seen(1, None)) == {1: 0x100}  # the archive not streaming: nothing new
    assert archived_by_timeline(known, None) == {1: 0x100}
    many = {1: 1, 2: 2, 3: 3}
    assert archived_by_timeline(many, seen(4, 0x400)) == {2: 2, 3: 3, 4: 0x400}
