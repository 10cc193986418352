"""The operator's one query to each server (instances/probe.FACTS) against a real PostgreSQL: it runs as the
database's superuser, and it lists the data kept aside on the pod's volume (entrypoint.sh: diverged-*) with its
mydb-kept.txt, which the operator reports in status and a Warning."""

from __future__ import annotations

import json
import shutil

from mydb_operator.instances.probe import FACTS
from mydb_operator.model.instances import kept_facts


def test_the_facts_query_answers_on_a_primary_and_lists_the_kept_data_beside_pgdata(primary, replica):
    kept = primary.pgdata.parent / "diverged-20261207T120000Z"
    other = primary.pgdata.parent / "not-kept"
    kept.mkdir()
    other.mkdir()
    (kept / "mydb-kept.txt").write_text("reason=rewind-failed\ntimeline=3\ncheckpoint=0/6000150\ndivergedAt=\n")
    try:
        sql = FACTS.replace("$1", "'mydb_archive'").replace("$2", "'mydb_replica_'")
        query = f"select row_to_json(facts) from ({sql}) facts"
        answered = primary.machine.psql(primary.ip, query)
        assert answered.returncode == 0, answered.stderr
        row = json.loads(answered.stdout)
        assert row["in_recovery"] is False and row["wal_lsn"] > 0 and row["data_checksums"] is True
        assert [entry["dir"] for entry in row["kept"]] == ["diverged-20261207T120000Z"]
        assert kept_facts(row["kept"][0]["info"]) == {"reason": "rewind-failed", "timeline": "3",
                                                      "checkpoint": "0/6000150"}
        on_replica = json.loads(replica.machine.psql(replica.ip, query).stdout)
        assert on_replica["in_recovery"] is True and on_replica["kept"] == []
    finally:
        shutil.rmtree(kept)
        shutil.rmtree(other)


def test_a_primary_in_crash_recovery_says_so_in_the_words_the_operator_waits_for(request, machine, rendered):
    """A backend killed with SIGKILL (as the OOM killer does): the postmaster ends every backend and replays its
    WAL in place. Meanwhile a connection is refused with the words policy/members.RECOVERING_WORDS lists, so a
    primary recovering by itself is waited for, not failed over; then it serves again with every commit."""
    import os
    import signal
    import time

    from mydb_operator.policy.members import RECOVERING_WORDS

    from .harness import DatabasePod

    own = machine.sibling("crash")
    pod = DatabasePod(own, rendered, 0)
    request.addfinalizer(pod.stop)
    pod.start()
    # WAL since the last checkpoint, for the replay to take a moment.
    pod.sql("CHECKPOINT; CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 300000)")
    backend = int(pod.sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"))
    os.kill(backend, signal.SIGKILL)
    said, heard = set(), []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = own.psql(pod.ip, "SELECT count(*) FROM t")
        if answer.returncode == 0 and said:
            break
        said.update(words for words in RECOVERING_WORDS if words in answer.stderr)
        heard.append(answer.stderr.strip())
        time.sleep(0.02)
    assert said, f"no connection was refused with the recovery's words: {heard}"
    assert pod.sql("SELECT count(*) FROM t") == "300000"


def test_a_standby_without_its_primary_says_the_newest_timeline_it_has_the_history_of(request, machine, rendered):
    """A standby that followed a promotion (fetching the new timeline's history first) and lost that primary too
    has no WAL receiver to ask: its last checkpoint still names the old timeline until its next restartpoint, so
    the probe takes the newest history file in pg_wal (a second failover soon after a first found every replica
    "on timeline 1" and promoted none)."""
    import time

    from .harness import DatabasePod

    own = machine.sibling("timeline")
    first, second = DatabasePod(own, rendered, 0), DatabasePod(own, rendered, 1)
    request.addfinalizer(second.stop)
    request.addfinalizer(first.stop)
    first.start()
    second.start()
    query = "select row_to_json(facts) from ({}) facts".format(
        FACTS.replace("$1", "'mydb_archive'").replace("$2", "'mydb_replica_'"))

    def timeline() -> tuple[int, str | None]:
        row = json.loads(own.psql(second.ip, query).stdout)
        return row["timeline"], row["receiver"]

    deadline = time.monotonic() + 30
    while timeline() != (1, "streaming") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert timeline() == (1, "streaming")
    first.stop()
    while timeline()[1] is not None and time.monotonic() < deadline + 30:
        time.sleep(0.2)
    assert timeline() == (1, None)  # no history of another timeline: its checkpoint's
    history = second.pgdata / "pg_wal" / "00000002.history"
    history.write_text("1\t0/3000000\tno recovery target specified\n")
    assert timeline() == (2, None)
