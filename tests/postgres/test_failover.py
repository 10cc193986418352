"""The primary moves: the chart's scripts under a failover, on the machine's real PostgreSQL.

What the operator does is played by the test in its place: it writes the
record (DatabasePod.record, the ConfigMap <name>-primary the pods mount),
promotes with pg_promote() and points a running replica at the new primary
with ALTER SYSTEM and a reload. The scripts must then do the rest: a pod
follows the recorded primary, a former primary is rewound onto the new
timeline, a standby that had received more than the promoted one is rewound
too, and nothing is ever replaced by another database's data or by an empty
cluster. Each test has a database of its own (a sibling machine: its own
port, record and credentials).
"""

from __future__ import annotations

import shutil

from .harness import DatabasePod, wait_for

TIMELINE = "SELECT timeline_id FROM pg_control_checkpoint()"
SYSTEM_ID = "SELECT system_identifier FROM pg_control_system()"


def database(request, machine, rendered, name: str, pods: int) -> list[DatabasePod]:
    """A database of PODS pods on a machine of its own: ordinal 0 primary, the others streaming from it."""
    own = machine.sibling(name)
    started = [DatabasePod(own, rendered, ordinal) for ordinal in range(pods)]
    for pod in started:
        request.addfinalizer(pod.stop)
    for pod in started:
        pod.start()
    return started


def rows(pod: DatabasePod) -> str:
    """Which writes the pod has, as 'kind,kind:count'; '' on a replica that has not replayed the table yet."""
    if pod.sql("SELECT to_regclass('t') IS NOT NULL") != "t":
        return ""
    return pod.sql("SELECT string_agg(DISTINCT written_on, ',' ORDER BY written_on) || ':' || count(*) FROM t")


def write(pod: DatabasePod, first: int, last: int, written_on: str) -> None:
    pod.sql(f"INSERT INTO t SELECT i, '{written_on}' FROM generate_series({first}, {last}) i")


def streaming_from(primary: DatabasePod, count: int) -> None:
    wait_for(f"{count} replicas streaming from {primary.name}", lambda: primary.sql(
        "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == str(count), timeout=30)


def promote(pod: DatabasePod) -> None:
    """The operator's promotion: pg_promote() waits until the server writes on its new timeline."""
    assert pod.sql("SELECT pg_promote(true, 30)") == "t"
    assert pod.sql("SELECT pg_is_in_recovery()") == "f"


def test_a_live_failover_promotes_in_place_and_the_other_replica_follows_after_a_reload(
        request, machine, rendered):
    """The primary crashes; the replica with the most WAL is promoted where it runs (no restart), and the other
    replica, pointed at it by ALTER SYSTEM SET primary_conninfo and a reload (no restart, no clone), streams from
    it on the new timeline: the replica's conninfo lives in postgresql.auto.conf, where ALTER SYSTEM writes, not
    on the command line, which would win over it."""
    old, chosen, other = database(request, machine, rendered, "live", 3)
    old.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(old, 1, 100, "old")
    for replica in (chosen, other):
        wait_for(f"the rows on {replica.name}", lambda: rows(replica) == "old:100")
    assert "host=127.0.0.1" in other.sql("SHOW primary_conninfo")
    old.stop()

    chosen.record(chosen)
    promote(chosen)
    other_pid = other.proc.pid
    # The operator makes the replicas' slots on the new primary before it points them there (policy/slots.py).
    chosen.sql("SELECT pg_create_physical_replication_slot('mydb_replica_2', true)")
    conninfo = other.sql("SHOW primary_conninfo").replace("host=127.0.0.1", "host=127.0.0.2")
    other.sql("ALTER SYSTEM SET primary_conninfo = '{}'".format(conninfo.replace("'", "''")))
    other.sql("SELECT pg_reload_conf()")
    write(chosen, 101, 150, "new")
    wait_for("the other replica to follow the new primary", lambda: rows(other) == "new,old:150", timeout=30)
    streaming_from(chosen, 1)
    assert other.sql(TIMELINE) == chosen.sql(TIMELINE) == "2" or other.sql(
        "SELECT received_tli FROM pg_stat_wal_receiver") == "2"
    assert other.proc.pid == other_pid and other.proc.poll() is None, "the replica restarted"


def test_a_former_primary_is_rewound_onto_the_promoted_replica_and_loses_only_its_unreplicated_tail(
        request, machine, rendered):
    """The replica is gone while the primary writes on alone, then the primary crashes and the replica is
    recorded as primary. Its pod starts as the standby it still is, following nobody (the scripts never promote);
    the operator's pg_promote makes it primary. The former primary's pod then waits for that, runs pg_rewind in
    its init container and streams from the new primary: the rows only it had (asynchronous replication's loss)
    are gone, the rows written on the new primary arrive, and it never served as a primary again."""
    old, new = database(request, machine, rendered, "rewind", 2)
    old.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(old, 1, 100, "both")
    wait_for("the rows on the replica", lambda: rows(new) == "both:100")
    new.stop("fast")
    write(old, 101, 150, "old-only")
    old.stop()

    new.record(new)
    new.start()
    assert "still a standby" in new.logs(), new.logs()
    assert new.sql("SELECT pg_is_in_recovery()") == "t"
    assert new.sql("SHOW primary_conninfo") == ""
    promote(new)
    write(new, 151, 180, "new-only")

    offset = len(old.logs())
    old.start()
    log = old.logs()[offset:]
    assert "was a primary" in log and "pg_rewind" in log, log
    assert "replica-bootstrap: cloned" not in log, log
    assert old.sql("SELECT pg_is_in_recovery()") == "t"
    wait_for("the former primary to stream the new rows", lambda: rows(old) == "both,new-only:130", timeout=30)
    assert old.sql(SYSTEM_ID) == new.sql(SYSTEM_ID)


def test_a_standby_that_received_more_than_the_promoted_one_is_rewound_too(request, machine, rendered):
    """One replica falls behind; the other receives rows the first never gets, then shuts down cleanly; the
    primary crashes and the one behind is promoted. The replica that was ahead cannot follow that timeline as it
    is: its init container rewinds it (it was shut down cleanly), and it streams from the new primary without the
    rows no longer on it. The former primary is rewound as well: the three agree."""
    old, behind, ahead = database(request, machine, rendered, "ahead", 3)
    old.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(old, 1, 100, "all")
    for replica in (behind, ahead):
        wait_for(f"the rows on {replica.name}", lambda: rows(replica) == "all:100")
    behind.stop("fast")
    write(old, 101, 120, "ahead")
    wait_for("the rows on the replica ahead", lambda: rows(ahead) == "ahead,all:120")
    ahead.stop("fast")
    old.stop()

    behind.record(behind)
    behind.start()
    promote(behind)
    write(behind, 121, 130, "after")
    for pod in (ahead, old):
        offset = len(pod.logs())
        pod.start()
        assert "pg_rewind" in pod.logs()[offset:], pod.logs()[offset:]
        wait_for(f"{pod.name} to follow the new primary", lambda: rows(pod) == "after,all:110", timeout=30)
    streaming_from(behind, 2)


def test_a_standby_never_rewinds_onto_another_database_system(request, machine, rendered):
    """The recorded primary is a different database system (its volume was lost and a new cluster made): the
    replica's init container refuses to rewind or re-clone onto it, says so, and exits 1, its data untouched."""
    primary, replica = database(request, machine, rendered, "foreign", 2)
    ours = replica.sql(SYSTEM_ID)
    replica.stop("fast")
    primary.stop()
    shutil.rmtree(primary.pgdata)
    primary.start()
    assert primary.sql(SYSTEM_ID) != ours

    code, served = replica.start_expecting_exit()
    assert code == 1 and not served, (code, replica.logs())
    assert "refusing to rewind or replace it" in replica.logs(), replica.logs()
    assert (replica.pgdata / "standby.signal").exists()
    control = replica.machine.run(["pg_controldata", "-D", str(replica.pgdata)], {"PATH": replica.machine.path})
    assert f"Database system identifier:           {ours}" in control.stdout, control.stdout


def test_the_recorded_primary_never_makes_an_empty_cluster(request, machine, rendered):
    """Once the record names a primary, the database has data elsewhere: that pod on an empty volume exits 1,
    saying why, instead of serving a new, empty database (the operator fails over to a replica with the data)."""
    own = machine.sibling("empty-recorded")
    pod = DatabasePod(own, rendered, 1)
    request.addfinalizer(pod.stop)
    pod.record(pod)
    code, served = pod.start_expecting_exit()
    assert code == 1 and not served, (code, pod.logs())
    assert "refusing to make an empty one" in pod.logs(), pod.logs()
    assert list(pod.home.rglob("PG_VERSION")) == []


def test_a_replica_paused_past_wal_keep_size_catches_up_through_its_slot(request, machine, rendered):
    """Each replica streams through a slot of its own on the primary (entrypoint.sh makes it): a replica whose
    server is stopped (SIGSTOP) while the primary writes and recycles far more WAL than wal_keep_size keeps
    catches up once resumed, with every row. Without the slot it never could: the WAL it needs is gone."""
    import os
    import signal

    primary, replica = database(request, machine, rendered, "slots", 2)
    assert replica.sql("SHOW primary_slot_name") == "mydb_replica_1"
    assert primary.sql("SELECT active FROM pg_replication_slots WHERE slot_name = 'mydb_replica_1'") == "t"
    primary.sql("ALTER SYSTEM SET wal_keep_size = '16MB'")
    primary.sql("SELECT pg_reload_conf()")
    primary.sql("CREATE TABLE t (id int, written_on text)")
    os.killpg(replica.proc.pid, signal.SIGSTOP)  # the pod's process group: its server and every child
    try:
        for batch in range(8):  # 8 x (a segment switch per 4 MB of rows, and a checkpoint): far past 16 MB
            write(primary, batch * 20000 + 1, (batch + 1) * 20000, "paused")
            primary.sql("SELECT pg_switch_wal(); CHECKPOINT")
        oldest = primary.sql("SELECT min(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'")
        # + 1: a restart_lsn at a segment's very start (the replica flushed up to a switch) is named by
        # pg_walfile_name after the segment before it, which the slot does not need.
        needed = primary.sql("SELECT pg_walfile_name(restart_lsn + 1) FROM pg_replication_slots "
                             "WHERE slot_name = 'mydb_replica_1'")
        assert needed >= oldest, "the slot did not keep the replica's WAL"
    finally:
        os.killpg(replica.proc.pid, signal.SIGCONT)
    wait_for("the replica to catch up", lambda: rows(replica) == "paused:160000", timeout=60)
