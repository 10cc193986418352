"""The continuous archive as the primary sees it: streaming or not, how far behind, and when that is an alarm. Pure.

The archive is a walsender on the primary (application_name mydb-archive) and a
replication slot there. Its status holds only what changes with the database
(the WAL it confirmed, its lag in bytes) and the moment it stopped streaming,
never a clock reading per pass: an idle database writes no status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .. import names
from ..model.instances import InstanceFacts, lsn_text, parse_lsn
from ..model.retention import retention_seconds
from ..model.timestamps import parse_time, rfc3339

# The archive replies every 5 s when there is nothing to write (wal-archive.sh): four missed replies are silence.
SILENT_SECONDS = 20.0
# How long the archive may be away (a restart, a failover's new primary) before BackupHealthy says so.
STALL_SECONDS = 30
# How many forks past the archive's position status lists, newest last.
DIVERGED_KEPT = 10


def archive_status(
    primary: InstanceFacts, previous: Mapping[str, Any], now: datetime, archived: Mapping[int, int] | None = None
) -> dict[str, Any]:
    """status.backup.archive from the primary's answer, the last status's archive entry and ARCHIVED, the WAL
    the archive confirmed on each recent timeline as the operator last read it (fresher than any status)."""
    walsender = next((s for s in primary.standbys if s.name == names.ARCHIVE_APPLICATION_NAME), None)
    streaming = (
        walsender is not None
        and walsender.state == "streaming"
        and walsender.reply_age is not None
        and walsender.reply_age <= SILENT_SECONDS
    )
    status: dict[str, Any] = {"streaming": streaming}
    if walsender is not None and walsender.flush_lsn is not None:
        status["archivedWAL"] = lsn_text(walsender.flush_lsn)
        status["lagBytes"] = max(0, primary.wal_lsn - walsender.flush_lsn)
        if primary.timeline is not None:
            status["timeline"] = primary.timeline
    else:
        status.update({k: previous[k] for k in ("archivedWAL", "timeline") if k in previous})
    diverged = list(previous.get("diverged") or [])
    for fork in forked_behind_archive(primary, previous, archived or {}):
        if not any((d.get("timeline"), d.get("from")) == (fork["timeline"], fork["from"]) for d in diverged):
            diverged.append(fork)
    if diverged:
        status["diverged"] = diverged[-DIVERGED_KEPT:]
    if primary.archive_slot:
        status["slot"] = primary.archive_slot
    status["since"] = previous.get("since") or rfc3339(now)  # when the operator first saw it: never changes
    if not streaming:
        # Since its last reply when the primary still lists it (stopped, hung), else since first seen away.
        silent = walsender.reply_age if walsender is not None and walsender.reply_age is not None else 0.0
        status["stalledSince"] = previous.get("stalledSince") or rfc3339(now - timedelta(seconds=silent))
    return status


def forked_behind_archive(
    primary: InstanceFacts, previous: Mapping[str, Any], archived: Mapping[int, int]
) -> list[dict[str, Any]]:
    """The WAL the archive holds of earlier timelines past the points where PRIMARY's history left them:
    commits a failover lost, which the archive keeps aside (wal-archive.sh, diverged-wal/).

    ARCHIVED is what the archive confirmed on each timeline as the operator last read it from that timeline's
    primary; PREVIOUS, the last status's archive entry, stands in for what an operator that started since
    did not read. The archive may hold a little more than it confirmed then, never less."""
    positions = dict(archived)
    old, lsn = previous.get("timeline"), parse_lsn(previous.get("archivedWAL"))
    if isinstance(old, int) and lsn is not None:
        positions[old] = max(positions.get(old, 0), lsn)
    ends = dict(primary.switchpoints)
    found = []
    for timeline, position in sorted(positions.items()):
        end = ends.get(timeline)
        if primary.timeline is None or timeline >= primary.timeline or end is None or position <= end:
            continue
        found.append(
            {
                "timeline": timeline,
                "from": lsn_text(end),
                "to": lsn_text(position),
                "bytes": position - end,
                "keptIn": f"diverged-wal/*-tl{timeline}",
            }
        )
    return found


def archive_health(release: str, archive: Mapping[str, Any], now: datetime) -> tuple[bool, str, str] | None:
    """(healthy, reason, message) for BackupHealthy when the archive decides it; None when it does not.

    The message stays the same while the fault lasts: a Warning Event goes out when it changes."""
    if archive.get("slot") == "lost":
        return (
            False,
            "ArchiveBroken",
            "the primary removed WAL the archive had not received (backup.maxRetainedWal was reached): "
            "the archive has a gap, and recovery to a later moment needs a new base backup",
        )
    if archive.get("slot") == "unreserved":
        return (
            False,
            "ArchiveFallingBehind",
            "the WAL archive is so far behind that the primary keeps more WAL for it than max_wal_size; at "
            "backup.maxRetainedWal it drops what the archive has not received",
        )
    since = parse_time(archive.get("stalledSince"))
    if since is not None and (now - since).total_seconds() >= STALL_SECONDS:
        return (
            False,
            "ArchiveStalled",
            f"the WAL archive has confirmed nothing since {archive['stalledSince']} (pod "
            f"{names.archive_statefulset(release)}-0 is not streaming); the primary keeps up to "
            "backup.maxRetainedWal of WAL for it",
        )
    return None


def base_backups(
    known: list[str], last_success: str | None, since: str | None, retention: str, now: datetime
) -> list[str]:
    """When each base backup kept was taken, oldest first: the recovery window starts at the first.

    Every backup Job that succeeds since the archive exists takes a base backup first (scripts/backup
    CronJob), so its success time is one. Retention as prune.sh applies it: older than the retention
    goes, but the newest stays, and so does the newest one older than the retention (a recovery to the
    window's first moments starts from it)."""
    times = sorted(set(known))
    if last_success and since and last_success >= since and (not times or last_success > times[-1]):
        times.append(last_success)
    cutoff = keep_after(retention, now)
    before = [t for t in times if (parse_time(t) or now) < cutoff]
    anchor = before[-1] if before else None
    return [t for t in times[:-1] if t == anchor or (parse_time(t) or now) >= cutoff] + times[-1:]


def keep_after(retention: str, now: datetime) -> datetime:
    """prune.sh's cutoff: a backup taken before it goes (unless it is the newest). A retention reaching back
    before the year 1 (9999999w is one the CRD takes) keeps everything, as in prune.sh's arithmetic."""
    try:
        return now - timedelta(seconds=retention_seconds(retention))
    except OverflowError:
        return datetime.min.replace(tzinfo=now.tzinfo)
