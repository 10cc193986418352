"""A replica whose history forked off the new primary's rejoins it, on the machine's real PostgreSQL.

After a failover in which the old primary went on taking writes for a while (it was not fenced yet), a replica
that still streamed from it received WAL past the point where the promoted replica's timeline forked off. It
cannot follow the new primary as it is: PostgreSQL refuses to start it on the new timeline ("requested
timeline 2 does not contain minimum recovery point ... on timeline 1") or its WAL receiver never streams. Its
pod's init container (the operator deletes the pod) must rewind it onto the new primary's timeline, whether it
was shut down cleanly or killed, and say which WAL it discarded; a replica that is only behind must start as it
is. The operator's part (the record, pg_promote(), ALTER SYSTEM primary_conninfo) is played by the test, as in
test_failover.py.
"""

from __future__ import annotations

import re

import pytest

from .harness import DatabasePod, wait_for
from .test_failover import SYSTEM_ID, TIMELINE, database, promote, rows, streaming_from, write

LSN = r"[0-9A-F]+/[0-9A-F]+"


def controldata(pod: DatabasePod) -> dict[str, str]:
    out = pod.machine.run(["pg_controldata", "-D", str(pod.pgdata)], {"PATH": pod.machine.path}).stdout
    return {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in out.splitlines())}


def lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def point_at(replica: DatabasePod, primary: DatabasePod) -> None:
    """The operator's move of a running replica onto the new primary: ALTER SYSTEM SET primary_conninfo, reload."""
    conninfo = replica.sql("SHOW primary_conninfo")
    conninfo = re.sub(r"host=\S+", f"host={primary.ip}", conninfo)
    replica.sql("ALTER SYSTEM SET primary_conninfo = '{}'".format(conninfo.replace("'", "''")))
    replica.sql("SELECT pg_reload_conf()")


def diverge(request, machine, rendered, name: str,
            past_fork: str = "replayed") -> tuple[DatabasePod, DatabasePod, DatabasePod, str, str]:
    """P primary, A and B streaming from it. A is promoted (a failover) while P, not fenced yet, takes more rows
    that B, still streaming from P, receives: B's history goes past the point where A's timeline forked off. A takes
    rows of its own; P stops; the operator points B at A (ALTER SYSTEM, reload), where its WAL receiver cannot
    follow. past_fork, what B did with the old primary's WAL past the fork: "replayed" it; "restartpoint", replayed
    it and made a restartpoint past the fork (as its checkpointer does every few minutes), so its pg_control's
    minimum recovery point is past it too; "received" only (its replay paused before the fork): only its pg_wal
    holds it. Returns P, A, B, the LSN where A's timeline forked off (A's history file) and the end of the WAL P
    sent B."""
    p, a, b = database(request, machine, rendered, name, 3)
    p.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(p, 1, 100, "all")
    for replica in (a, b):
        wait_for(f"the rows on {replica.name}", lambda replica=replica: rows(replica) == "all:100")
    if past_fork == "received":
        b.sql("SELECT pg_wal_replay_pause()")
    a.record(a)
    promote(a)
    fork = a.sql("SELECT pg_read_file('pg_wal/00000002.history')").split()[1]
    write(p, 101, 150, "p-only")
    if past_fork == "restartpoint":
        p.sql("CHECKPOINT")
    end = p.sql("SELECT pg_current_wal_lsn()")
    wait_for(f"{b.name} to receive the old primary's WAL past the fork",
             lambda: lsn(b.sql("SELECT pg_last_wal_receive_lsn()")) >= lsn(end))
    if past_fork == "received":
        assert lsn(b.sql("SELECT pg_last_wal_replay_lsn()")) <= lsn(fork) and rows(b) == "all:100"
    else:
        wait_for(f"{b.name} to replay it", lambda: lsn(b.sql("SELECT pg_last_wal_replay_lsn()")) >= lsn(end))
        assert rows(b) == "all,p-only:150"
    if past_fork == "restartpoint":
        b.sql("CHECKPOINT")
        assert lsn(b.sql("SELECT min_recovery_end_lsn FROM pg_control_recovery()")) > lsn(fork)
    write(a, 151, 180, "a-only")
    p.stop()
    a.sql("SELECT pg_create_physical_replication_slot('mydb_replica_2', true)")
    offset = len(b.logs())
    point_at(b, a)
    if past_fork != "received":
        wait_for(f"{b.name}'s WAL receiver to find it cannot follow {a.name}",
                 lambda: "forked off current database system timeline" in b.logs()[offset:], timeout=30)
    return p, a, b, fork, end


def assert_rewound_onto(b: DatabasePod, a: DatabasePod, log: str, fork: str, end_before: str) -> None:
    """B streams from A on A's timeline with A's rows and none of the old primary's rows past the fork; the log
    names the WAL discarded: from the fork to where B's WAL ended."""
    assert "pg_rewind" in log and "servers diverged at WAL location" in log, log
    assert "replica-bootstrap: cloned" not in log and "entrypoint: kept" not in log, log
    discarded = [line for line in log.splitlines() if "discarded" in line and line.startswith("follow: ")]
    assert len(discarded) == 1, log
    found = re.findall(LSN, discarded[0])
    assert found[:1] == [fork] and lsn(found[-1]) >= lsn(end_before) > lsn(fork), (discarded, fork, end_before)
    assert "servers diverged at WAL location " + fork in log, log
    assert b.sql("SELECT pg_is_in_recovery()") == "t"
    wait_for(f"{b.name} to stream {a.name}'s rows", lambda: rows(b) == "a-only,all:130", timeout=30)
    streaming_from(a, 1)
    assert b.sql("SELECT received_tli FROM pg_stat_wal_receiver") == a.sql(TIMELINE) == "2"
    assert b.sql(SYSTEM_ID) == a.sql(SYSTEM_ID)
    write(a, 181, 190, "a-only")
    wait_for(f"{b.name} to stream new rows", lambda: rows(b) == "a-only,all:140", timeout=30)


@pytest.mark.parametrize("past_fork", ["replayed", "received"])
def test_a_replica_that_streamed_past_the_fork_and_shut_down_cleanly_is_rewound_onto_the_new_primary(
        request, machine, rendered, past_fork):
    """B, past the fork, is shut down cleanly ("shut down in recovery") and its pod re-created: its init container
    rewinds it onto A's timeline (pg_rewind), and it streams from A; the old primary's rows past the fork are gone
    from it (asynchronous replication's loss) and the log names the WAL range it discarded. Also when B had only
    received that WAL, its replay behind the fork: its minimum recovery point is before the fork, so pg_rewind
    alone finds "no rewind required", and B would then replay the old primary's WAL from its pg_wal (it is replayed
    to its end first, as a standby of nobody)."""
    _, a, b, fork, end = diverge(request, machine, rendered, f"diverged-clean-{past_fork}", past_fork)
    b.stop("fast")
    control = controldata(b)
    assert control["Database cluster state"] == "shut down in recovery", control
    assert (lsn(control["Minimum recovery ending location"]) > lsn(fork)) == (past_fork == "replayed"), control
    offset = len(b.logs())
    b.start()
    log = b.logs()[offset:]
    assert ("as a standby of nobody" in log) == (past_fork == "received"), log
    assert_rewound_onto(b, a, log, fork, end)


@pytest.mark.parametrize("past_fork", ["restartpoint", "replayed"])
def test_a_replica_that_streamed_past_the_fork_and_was_killed_is_rewound_onto_the_new_primary(
        request, machine, rendered, past_fork):
    """B, past the fork, is killed (immediate stop: what a crash-looping container leaves, "in archive recovery"),
    with a restartpoint past the fork (its pg_control says so) or without one (only its pg_wal holds the old
    primary's WAL past the fork, which PostgreSQL would replay from there). Its server container restarting alone
    would crash-loop on PostgreSQL's FATAL ("requested timeline 2 is not a child of this server's history", "...
    does not contain minimum recovery point"), or replay that WAL and never stream: it exits 4 instead, saying to
    delete the pod, its data untouched. The pod re-created, its init container replays B to the end of its own WAL
    as a standby of nobody (never writable) and shuts it down there, rewinds it, and B streams from A without the
    old primary's rows past the fork; the log names the WAL range it discarded."""
    _, a, b, fork, end = diverge(request, machine, rendered, f"diverged-killed-{past_fork}", past_fork)
    b.stop("immediate")
    control = controldata(b)
    assert control["Database cluster state"] == "in archive recovery", control
    assert (lsn(control["Minimum recovery ending location"]) > lsn(fork)) == (past_fork == "restartpoint"), control
    pg_control = (b.pgdata / "global" / "pg_control").read_bytes()

    offset = len(b.logs())
    code, served = b.start_expecting_exit(init=False, timeout=20)    # its server container restarting alone
    log = b.logs()[offset:]
    assert code == 4 and not served, (code, log)
    assert "delete the pod" in log and "FATAL" not in log, log
    assert (b.pgdata / "global" / "pg_control").read_bytes() == pg_control, "the serve container changed the data"

    offset = len(b.logs())
    b.start()
    log = b.logs()[offset:]
    assert "as a standby of nobody" in log, log
    assert_rewound_onto(b, a, log, fork, end)


def test_a_killed_replica_that_is_only_behind_starts_as_it_is(request, machine, rendered):
    """B is killed while behind (it never received anything past the fork); the primary goes on, A receives more,
    the primary crashes and A is promoted. B's pod re-created, its init container finds its history on A's (no
    rewind, no clone): it starts as it is, switches to A's timeline as it streams and gets every row."""
    p, a, b = database(request, machine, rendered, "behind-killed", 3)
    p.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(p, 1, 100, "all")
    for replica in (a, b):
        wait_for(f"the rows on {replica.name}", lambda replica=replica: rows(replica) == "all:100")
    b.stop("immediate")
    assert controldata(b)["Database cluster state"] == "in archive recovery"
    write(p, 101, 150, "p-and-a")
    wait_for(f"the rows on {a.name}", lambda: rows(a) == "all,p-and-a:150")
    p.stop()
    a.record(a)
    promote(a)
    write(a, 151, 180, "a-only")
    a.sql("SELECT pg_create_physical_replication_slot('mydb_replica_2', true)")

    offset = len(b.logs())
    b.start()
    log = b.logs()[offset:]
    assert "pg_rewind" not in log and "replica-bootstrap: cloned" not in log and "entrypoint: kept" not in log, log
    assert "starts as it is" in log and "has not diverged" in log, log
    wait_for(f"{b.name} to stream {a.name}'s rows", lambda: rows(b) == "a-only,all,p-and-a:180", timeout=30)
    streaming_from(a, 1)
    assert b.sql("SELECT received_tli FROM pg_stat_wal_receiver") == "2"
