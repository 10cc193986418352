"""High availability on real pods: failover, switchover, and the primary as a fact the operator owns.

Each test's database runs three real PostgreSQL pods on the real node, under an
operator of its own namespace (the platform config of examples/platform-local-node.yaml,
pinning the images of 15.2 and 15.3 by digest, as a platform that pins images does).
A writer pod commits one row per connection through the read-write Service, as
a client would, and logs which ids were committed, where and when: the tests
check that none is lost where none may be, and that writes go on elsewhere.
How long writes stop is the benchmark's figure (bench/failover.py), printed
here, never asserted.
"""

from __future__ import annotations

import calendar
import json
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

from .application import as_client, secret_keys
from .conftest import operator_instead, wait_ready
from .primaries import (
    Writer,
    container_pids,
    hang,
    missing_writes,
    pod_ip,
    postgres_pid,
    primaries,
    resume,
    sql_at,
    stream_cut,
    unavailable,
    wait_until,
)
from .realnode import REGISTRY, pinned_platform, registry_digest
from .sharing import OWN_PREFIX, create_namespace
from .test_real_postgres import ROW_FACTS, rows, wait_streaming, write_rows
from .waiting import get_json, wait_for

# One database serves the module's tests in turn: one worker runs them all (tests/conftest.py).
pytestmark = pytest.mark.e2e
PODS = ["ha-0", "ha-1", "ha-2"]
LOST_NODE = "mydb.test/lost-node"  # a finalizer: the pod stays Terminating until the test releases it


def status(cluster, namespace: str, name: str = "ha") -> dict:
    return get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}


def condition(cluster, namespace: str, type_: str, name: str = "ha") -> dict:
    return next((c for c in status(cluster, namespace, name).get("conditions") or [] if c["type"] == type_), {})


def events(cluster, namespace: str, reason: str) -> list[dict]:
    listed = get_json(cluster, "-n", namespace, "events", "--field-selector", f"reason={reason}")
    return listed.get("items") or []


def told(cluster, namespace: str, reason: str, name: str = "ha", before: int = 0) -> None:
    """Exactly one Event REASON about NAME (besides BEFORE earlier ones, of earlier tests). kopf posts the Events
    of a pass after its status write, so a test that has just seen the status waits a moment for them."""
    def about() -> list[dict]:
        return [e for e in events(cluster, namespace, reason) if e["involvedObject"]["name"] == name]
    try:
        wait_for(f"one {reason} Event", lambda: len(about()) == before + 1, timeout=15)
    except AssertionError as error:
        raise AssertionError(f"{error}: {[(e.get('count'), e.get('message')) for e in about()]}") from None


def create(cluster, namespace: str, name: str = "ha", **spec) -> None:
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": name},
            "spec": {"replicas": 3, "version": "15.2", "storage": "1Gi", **spec}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait_ready(cluster, namespace, name, timeout=300)
    wait_streaming(cluster, namespace, status(cluster, namespace, name)["primary"], spec.get("replicas", 3) - 1)


def settled(cluster, namespace: str, primary: str, name: str = "ha") -> None:
    """Ready again, PRIMARY the primary by every account, the other pods streaming from it. (Ready alone can be
    the last status an operator wrote before it was killed: the primary is waited for too.)"""
    wait_ready(cluster, namespace, name, timeout=300)
    wait_for(f"{primary} the primary by every account", lambda: (lambda f: (f.get("primary"), f.get(
        "targetPrimary"), f.get("ready")) == (primary, primary, True))(status(cluster, namespace, name)), timeout=150)
    facts = status(cluster, namespace, name)
    wait_streaming(cluster, namespace, primary, len(facts["instances"]) - 1, timeout=150)


@pytest.fixture(scope="module")
def ha(cluster, operator, tmp_path_factory):
    """A namespace for the module, and an operator for it whose databases run on the real node."""
    namespace = create_namespace(cluster, "failover", prefix=OWN_PREFIX)
    platform = tmp_path_factory.mktemp("failover") / "platform.yaml"
    platform.write_text(yaml.safe_dump(pinned_platform("15.2", "15.3")))
    with operator_instead(operator, namespace, "operator-failover.log", MYDB_PLATFORM_CONFIG=str(platform)) as own:
        yield namespace, own
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_a_planned_switchover_loses_no_row_and_moves_the_primary(cluster, ha):
    """The annotation names a replica: the primary is fenced and shut down cleanly, the replica, which got every
    record, is promoted, the annotation is answered (removed), status and an Event say so. Every row the writer
    had committed is on the new primary; the former primary streams from it."""
    namespace, _ = ha
    # With backups, so the archive streams through every promotion of this module (test_the_archive_...).
    create(cluster, namespace, backup={"schedule": "0 3 * * *"})
    assert status(cluster, namespace)["primary"] == "ha-0"
    old_ip = pod_ip(cluster, namespace, "ha-0")
    writer = Writer(cluster, namespace, "ha")
    started = time.time()
    cluster.kubectl("annotate", "-n", namespace, "mydb/ha", "myapp.example.com/switchover-to=ha-2")
    wait_for("the switchover", lambda: events(cluster, namespace, "SwitchoverCompleted"), timeout=120)
    wait_for("writes on ha-2", lambda: writer.first_after(started, old_ip), timeout=60)
    writes = writer.halt()
    assert missing_writes(cluster, namespace, "ha-2", writes) == []
    print(f"\nswitchover: writes stopped for {unavailable(writes, started):.1f}s")
    settled(cluster, namespace, "ha-2")
    facts = status(cluster, namespace)
    assert facts["lastSwitchover"]["from"] == "ha-0" and facts["lastSwitchover"]["to"] == "ha-2"
    assert facts["timeline"] == 2
    assert "myapp.example.com/switchover-to" not in get_json(cluster, "-n", namespace, "mydb", "ha")["metadata"].get(
        "annotations", {})
    assert primaries(cluster, namespace, PODS) == ["ha-2"]


def test_a_deleted_record_moves_no_primary_and_is_written_again_from_the_servers(cluster, ha):
    """After the switchover the primary is ha-2 and ordinal 0 a replica. The record ConfigMap is deleted (a
    cleanup script, a GitOps prune) while a client writes: no pod is fenced or promoted, the record is written
    again naming ha-2 with one Warning, and every row the client was told committed is on ha-2. (It used to
    mean ordinal 0: ha-2 was fenced and ha-0 promoted at once, without the lag check.)"""
    namespace, _ = ha
    assert status(cluster, namespace)["primary"] == "ha-2"
    uids = {pod: get_json(cluster, "-n", namespace, "pod", pod)["metadata"]["uid"] for pod in PODS}
    writer = Writer(cluster, namespace, "ha")
    cluster.kubectl("delete", "configmap", "-n", namespace, "ha-primary")
    wait_for("the record written again", lambda: get_json(cluster, "-n", namespace, "configmap", "ha-primary").get(
        "data", {}).get("primary") == "ha-2", timeout=60)
    told(cluster, namespace, "PrimaryRecordRebuilt")
    time.sleep(3)  # a few more writes after the record is back
    writes = writer.halt()
    assert [w for w in writes if not w.ok] == [], "a write failed: the primary moved"
    assert missing_writes(cluster, namespace, "ha-2", writes) == []
    assert {pod: get_json(cluster, "-n", namespace, "pod", pod)["metadata"]["uid"] for pod in PODS} == uids
    assert primaries(cluster, namespace, PODS) == ["ha-2"]
    assert not events(cluster, namespace, "FailoverStarted")
    settled(cluster, namespace, "ha-2")


def test_a_minor_version_change_restarts_the_pods_with_exactly_one_switchover(cluster, ha):
    """15.2 -> 15.3: the replicas' pods are replaced first, one at a time, then the primary moves once by a
    switchover and its pod is replaced last, as a replica: writes stop only for the switchover, none is lost.
    The platform pins both images by digest: the pods run 15.3's exactly, and 15.4, which it does not pin, is
    refused in status with no pod touched."""
    namespace, _ = ha
    before = len(events(cluster, namespace, "SwitchoverStarted"))
    primary = status(cluster, namespace)["primary"]
    uids = {pod: get_json(cluster, "-n", namespace, "pod", pod)["metadata"]["uid"] for pod in PODS}
    writer = Writer(cluster, namespace, "ha")
    started = time.time()
    cluster.kubectl("patch", "-n", namespace, "mydb/ha", "--type=merge", "-p", '{"spec": {"version": "15.3"}}')
    replaced: list[str] = []  # in the order the poll first saw each pod replaced

    def all_replaced() -> bool:
        for pod in PODS:
            uid = (get_json(cluster, "-n", namespace, "pod", pod).get("metadata") or {}).get("uid")
            if pod not in replaced and uid != uids[pod]:
                replaced.append(pod)
        return len(replaced) == 3
    wait_for("every pod replaced", all_replaced, timeout=600, interval=0.3)
    assert replaced[-1] == primary, replaced
    # The platform pins 15.3's image: the pods run exactly it, by digest, and status says so.
    pinned = f"{REGISTRY}/library/postgres:15.3@{registry_digest('library/postgres', '15.3')}"
    wait_for("the new image everywhere", lambda: status(cluster, namespace).get("image") == pinned
             and not status(cluster, namespace).get("pendingRestart")
             and status(cluster, namespace).get("ready"), timeout=300)
    writes = writer.halt()
    new_primary = status(cluster, namespace)["primary"]
    assert new_primary != primary
    assert len(events(cluster, namespace, "SwitchoverStarted")) - before == 1
    assert missing_writes(cluster, namespace, new_primary, writes) == []
    print(f"\nminor version roll: writes stopped for {unavailable(writes, started):.1f}s at most")
    for pod in PODS:
        image = get_json(cluster, "-n", namespace, "pod", pod)["spec"]["containers"][0]["image"]
        assert image == pinned, (pod, image)
    settled(cluster, namespace, new_primary)
    # The tag says 15.3; the server says what it runs (Debian's 15.x under both stand-ins).
    number = int(sql_at(cluster, namespace, new_primary, "show server_version_num") or 0)
    runs = f"{number // 10000}.{number % 10000}"
    wait_for(f"status.version {runs} and every instance at it", lambda: (lambda f: f.get("version") == runs
             and {entry.get("version") for entry in f["instances"]} == {runs})(status(cluster, namespace)), timeout=30)

    # A version the platform pins no image for is refused in status, and no pod is touched; back to 15.3.
    running = {pod: get_json(cluster, "-n", namespace, "pod", pod)["metadata"]["uid"] for pod in PODS}
    cluster.kubectl("patch", "-n", namespace, "mydb/ha", "--type=merge", "-p", '{"spec": {"version": "15.4"}}')
    refused = "spec.version: PostgreSQL 15.4 has no pinned image on this platform, which pins 15.2, 15.3"
    wait_for("15.4 refused", lambda: refused in condition(cluster, namespace, "Ready").get("message", ""), timeout=60)
    assert {pod: get_json(cluster, "-n", namespace, "pod", pod)["metadata"]["uid"] for pod in PODS} == running
    assert get_json(cluster, "-n", namespace, "statefulset", "ha")["spec"]["template"]["spec"]["containers"][0][
        "image"] == pinned
    cluster.kubectl("patch", "-n", namespace, "mydb/ha", "--type=merge", "-p", '{"spec": {"version": "15.3"}}')
    settled(cluster, namespace, new_primary)


def test_a_hung_primary_is_replaced_by_the_most_advanced_replica_and_comes_back_as_its_replica(cluster, ha):
    """The primary's postmaster is stopped from the host (SIGSTOP). After failoverDelay a replica is promoted,
    the read-write Service moves to it and writes go on there, with every row that had reached the replicas
    before the hang. The former primary, killed by the fencing (SIGCONT then finds nothing, or a server that
    is no primary), comes back as a replica of the new one, rewound by pg_rewind; writes never land on it.
    The archive was ahead of every replica: it streams the new timeline and keeps the old one's tail, the commits
    the failover lost, aside (diverged-wal/), which status and a Warning report with the range."""
    namespace, own = ha
    old = status(cluster, namespace)["primary"]
    old_timeline = status(cluster, namespace)["timeline"]
    replicas = [p for p in PODS if p != old]
    write_rows(cluster, namespace, old)
    for pod in replicas:
        wait_for(f"the rows on {pod}", lambda: rows(cluster, namespace, pod) == ROW_FACTS, timeout=30)
    old_ip = pod_ip(cluster, namespace, old)
    writer = Writer(cluster, namespace, "ha")
    # The archive ahead of every replica: the stream to the replicas is cut while the primary commits a tail,
    # which the archive alone receives; the operator reads the archive's position with the primary's (every
    # 10 s). The cut lasts until the former primary's server is gone (the fencing kills it).
    pid = postgres_pid(cluster, namespace, old)
    with stream_cut(cluster, namespace, old, replicas):
        assert sql_at(cluster, namespace, old, "create table tail as select generate_series(1, 50) as id") is not None
        # After the commit: in the same statement string the position read would be the WAL written before it.
        tail = sql_at(cluster, namespace, old, "select pg_current_wal_lsn()")
        wait_for("the archive to have the tail", lambda: archived(cluster, namespace, old), timeout=30)
        time.sleep(12)
        hung = time.time()
        hang(pid)
        try:
            first = wait_for("a write on another server", lambda: writer.first_after(hung, old_ip), timeout=120)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{failover_diagnostics(cluster, namespace, own)}") from None
        finally:
            resumed = resume(pid)
        wait_for(f"{old}'s server gone", lambda: not resumed or postgres_pid_or_none(cluster, namespace, old) != pid,
                 timeout=60)
    new = status(cluster, namespace)["targetPrimary"]
    assert new in replicas and first.server == pod_ip(cluster, namespace, new)
    print(f"\nhung primary: first write on {new} {first.at - hung:.1f}s after the hang"
          f" (the old server was {'still there' if resumed else 'killed'} at SIGCONT)")
    assert rows(cluster, namespace, new) == ROW_FACTS
    # kopf posts a pass's Events after its status write, and the writer can reach the new primary before then.
    wait_for("the FailoverStarted and Promoted Events", lambda: events(cluster, namespace, "FailoverStarted")
             and events(cluster, namespace, "Promoted"), timeout=15)
    wait_for(f"{old} back as a replica of {new}",
             lambda: sql_at(cluster, namespace, old, "select pg_is_in_recovery()") == "t", timeout=150)
    settled(cluster, namespace, new)
    writes = writer.halt()
    assert [w for w in writes if w.ok and w.at > first.at and w.server != first.server] == []
    assert missing_writes(cluster, namespace, new, [w for w in writes if w.at > first.at]) == []
    assert "pg_rewind" in cluster.kubectl("logs", "-n", namespace, old, "-c", "bootstrap").stdout
    facts = status(cluster, namespace)
    assert facts["lastFailover"]["from"] == old and facts["lastFailover"]["to"] == new
    assert primaries(cluster, namespace, PODS) == [new]
    # The tail the failover lost is on no server; the archive keeps it aside, and status says where and what.
    assert sql_at(cluster, namespace, new, "select to_regclass('tail') is null") == "t"
    [diverged] = wait_for("status.backup.archive.diverged", lambda: facts_of_archive(cluster, namespace).get(
        "diverged"), timeout=60)
    assert diverged["timeline"] == old_timeline and diverged["keptIn"] == f"diverged-wal/*-tl{old_timeline}"
    assert sql_at(cluster, namespace, new, f"select '{diverged['from']}'::pg_lsn < '{tail}'::pg_lsn and "
                  f"'{tail}'::pg_lsn <= '{diverged['to']}'::pg_lsn") == "t", (diverged, tail)
    told(cluster, namespace, "ArchiveKeptDivergedWAL")
    kept = cluster.kubectl("exec", "-n", namespace, "ha-wal-0", "--", "sh", "-c",
                           'ls "$(dirname "$ARCHIVE_DIR")/diverged-wal"').stdout.split()
    assert [d for d in kept if d.endswith(f"-tl{old_timeline}")], kept
    # The application's role logs in on the new primary, through the Service, as before the failover.
    wait_for("status.application ready", lambda: (status(cluster, namespace).get("application") or {}).get("ready"),
             timeout=60)
    app = secret_keys(cluster, namespace, "ha-app")
    answered = as_client(cluster, namespace, new, app["uri"], "select current_user, pg_is_in_recovery()")
    assert answered.returncode == 0 and answered.stdout.strip() == "app|f", answered.stderr


def facts_of_archive(cluster, namespace: str) -> dict:
    return (status(cluster, namespace).get("backup") or {}).get("archive") or {}


def failover_diagnostics(cluster, namespace: str, operator) -> str:
    """What the operator said while no failover came: the Failover condition, its Events, its log's tail."""
    listed = get_json(cluster, "-n", namespace, "events", "--sort-by=.lastTimestamp")["items"]
    said = [f"{e['reason']}: {e['message']}" for e in listed if e["involvedObject"]["name"] == "ha"][-8:]
    log = [line for line in operator.log_since_start().splitlines() if "failover" in line.lower()
           or "eligible" in line.lower() or "refus" in line.lower()][-15:]
    return "\n".join([f"Failover: {condition(cluster, namespace, 'Failover')}", *said, *log])


def archived(cluster, namespace: str, primary: str) -> bool:
    """The archive has flushed everything PRIMARY has written so far."""
    return sql_at(cluster, namespace, primary, "select coalesce(bool_or(flush_lsn >= pg_current_wal_lsn()), false)"
                  " from pg_stat_replication where application_name = 'mydb-archive'") == "t"


def test_the_archive_follows_every_promotion_and_recovers_a_new_database_to_a_moment_after_the_failover(
        cluster, ha):
    """The archive has streamed since the database was made (its first base backup was taken once it was Ready),
    through the switchovers and the failover above. Rows written, a moment, more rows, the table dropped: a new
    database restored to that moment has the first rows and the table, and nothing written after it."""
    namespace, _ = ha
    facts = status(cluster, namespace)
    assert facts["lastFailover"] and facts["timeline"] >= 3, facts
    assert facts["backup"]["firstBackupJob"], facts
    wait_for("the first base backup", lambda: (status(cluster, namespace).get("backup") or {}).get(
        "lastSuccessfulTime"), timeout=180)
    wait_for("the archive streaming", lambda: ((status(cluster, namespace).get("backup") or {}).get(
        "archive") or {}).get("streaming"), timeout=60)
    primary = facts["primary"]
    assert sql_at(cluster, namespace, primary, "create table pitr (kind text); insert into pitr select 'before' "
                  "from generate_series(1, 100)") is not None
    time.sleep(0.5)
    moment = sql_at(cluster, namespace, primary, "select replace(to_char(clock_timestamp() at time zone 'utc',"
                    " 'YYYY-MM-DD HH24:MI:SS.US'), ' ', 'T') || 'Z'")
    time.sleep(0.5)
    assert sql_at(cluster, namespace, primary, "insert into pitr select 'after' from generate_series(1, 10);"
                  " drop table pitr") is not None
    wait_for("the archive to have the drop", lambda: archived(cluster, namespace, primary), timeout=30)
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": "restored"},
            "spec": {"replicas": 1, "version": "15.3", "storage": "1Gi",
                     "restore": {"fromDatabase": "ha", "pointInTime": moment}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait_ready(cluster, namespace, "restored", timeout=300)
    assert sql_at(cluster, namespace, "restored-0", "select count(*) from pitr where kind = 'before'") == "100"
    assert sql_at(cluster, namespace, "restored-0", "select count(*) from pitr where kind <> 'before'") == "0"
    assert rows(cluster, namespace, "restored-0") == ROW_FACTS  # the earlier tests' rows, from timeline 1
    assert "recover: base backup" in cluster.kubectl("logs", "-n", namespace, "restored-0", "-c", "bootstrap").stdout

    # A moment before the first base backup: the first boot refuses, and status says why, with the window.
    early = {**body, "metadata": {"name": "too-early"}, "spec": {
        **body["spec"], "restore": {"fromDatabase": "ha", "pointInTime": "2001-01-01T00:00:00Z"}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(early))
    said = wait_for("the refusal in status", lambda: (lambda m: m if "before the first recoverable point" in m else None)(
        status(cluster, namespace, "too-early").get("message") or ""), timeout=120)
    assert "the archive recovers from" in said, said
    cluster.kubectl("delete", "-n", namespace, "mydb/too-early", "--wait=false")


def test_a_stalled_archive_turns_backup_healthy_false_with_one_warning_and_the_primary_keeps_serving(
        cluster, ha):
    """The archive's processes are stopped (SIGSTOP from the host): within a minute BackupHealthy is False
    (ArchiveStalled) with one Warning, writes go on; resumed, the archive reconnects and it is True again."""
    namespace, _ = ha
    primary = status(cluster, namespace)["primary"]
    pids = container_pids(cluster, namespace, "ha-wal-0", "wal-archive")
    stopped = time.time()
    for pid in pids:
        hang(pid)
    try:
        wait_for("BackupHealthy False", lambda: condition(cluster, namespace, "BackupHealthy").get(
            "reason") == "ArchiveStalled", timeout=120)
        print(f"\narchive stalled: BackupHealthy False {time.time() - stopped:.0f}s after the stop")
        assert sql_at(cluster, namespace, primary, "create table if not exists during_stall (id int);"
                      " insert into during_stall values (1)") is not None
        told(cluster, namespace, "ArchiveStalled")
    finally:
        for pid in pids:
            resume(pid)
    wait_for("BackupHealthy True", lambda: condition(cluster, namespace, "BackupHealthy").get("status") == "True",
             timeout=180)
    wait_for("the archive caught up", lambda: archived(cluster, namespace, primary), timeout=30)


def verified(cluster, namespace: str, token: str) -> str:
    """Ask for a verification and wait for its result (Succeeded or Failed)."""
    cluster.kubectl("annotate", "--overwrite", "-n", namespace, "mydb/ha", f"myapp.example.com/verify-backup={token}")

    def result() -> str | None:
        backup = status(cluster, namespace).get("backup") or {}
        if backup.get("lastVerificationRequest") != token:
            return None
        outcome = (backup.get("lastVerification") or {}).get("result")
        return outcome if outcome in ("Succeeded", "Failed") else None

    return wait_for(f"verification {token}", result, timeout=180)


def test_a_verification_recovers_the_newest_base_backup_in_a_throwaway_pod_and_reports_a_damaged_one(
        cluster, ha):
    """verify-backup: the newest base backup and the archive recover in a Job's pod and answer a query
    (Succeeded); a newer copy of it with one byte of pg_control changed fails (BackupHealthy False,
    VerificationFailed, one Warning). Last of the tests that read ha's BackupHealthy: it stays False."""
    namespace, _ = ha
    assert verified(cluster, namespace, "v1") == "Succeeded"
    job = status(cluster, namespace)["backup"]["lastVerificationJob"]
    assert "verify: ok: base backup" in cluster.kubectl("logs", "-n", namespace, f"job/{job}").stdout
    damage = ("cd /backups/base && newest=$(ls | grep -E '^[0-9]{8}T[0-9]{6}Z$' | sort | tail -n 1)"
              " && cp -R $newest 29991231T235959Z"
              " && printf X | dd of=29991231T235959Z/data/global/pg_control bs=1 seek=100 conv=notrunc")
    cluster.kubectl("exec", "-n", namespace, "ha-wal-0", "-c", "wal-archive", "--", "sh", "-c", damage)
    try:
        assert verified(cluster, namespace, "v2") == "Failed"
        wait_for("BackupHealthy False", lambda: condition(cluster, namespace, "BackupHealthy").get(
            "reason") == "VerificationFailed", timeout=30)
        told(cluster, namespace, "VerificationFailed")
    finally:
        cluster.kubectl("exec", "-n", namespace, "ha-wal-0", "-c", "wal-archive", "--",
                        "rm", "-rf", "/backups/base/29991231T235959Z")


def restore_from_ha(cluster, namespace: str, name: str, **restore) -> None:
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": name},
            "spec": {"replicas": 1, "version": "15.3", "storage": "1Gi", "restore": {"fromDatabase": "ha", **restore}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait_ready(cluster, namespace, name, timeout=300)


def in_archive_pod(cluster, namespace: str, line: str) -> str:
    return cluster.kubectl("exec", "-n", namespace, "ha-wal-0", "-c", "wal-archive", "--", "sh", "-c", line).stdout


def test_retention_removes_what_is_outside_the_window_and_the_oldest_moment_inside_still_recovers(cluster, ha):
    """Two base backups. prune.sh run at a time when the first alone is past a 1h retention keeps both: the first
    is the newest before the window's start, which a recovery to the window's first moments needs. Run when
    both are past it: the first goes, and every archived segment before the second's first; a new database
    recovers to the second's end, the window's start."""
    namespace, _ = ha
    cluster.kubectl("annotate", "--overwrite", "-n", namespace, "mydb/ha", "myapp.example.com/backup-now=second-base")
    wait_for("the second base backup", lambda: (lambda b: b.get("lastOnDemandRequest") == "second-base" and b.get(
        "lastSuccessfulJob") == b.get("lastOnDemandJob"))(status(cluster, namespace).get("backup") or {}), timeout=180)
    listing = "ls /backups/base | grep -E '^[0-9]{8}T[0-9]{6}Z$' | sort"
    first, second = in_archive_pod(cluster, namespace, listing).split()[:2]
    primary = status(cluster, namespace)["primary"]
    sql_at(cluster, namespace, primary, "create table after_second (id int); insert into after_second values (1)")
    wait_for("the archive to have it", lambda: archived(cluster, namespace, primary), timeout=30)
    # The first base backup's time plus the retention and a second: it alone is outside the window, and stays.
    at = calendar.timegm(time.strptime(first, "%Y%m%dT%H%M%SZ")) + 3600 + 1
    pruned = in_archive_pod(cluster, namespace, f"BACKUP_DIR=/backups BACKUP_RETENTION=1h NOW={at} sh /scripts/prune.sh")
    assert "removed base backup" not in pruned and in_archive_pod(cluster, namespace, listing).split()[:2] == [
        first, second], pruned
    # The second's time plus the retention and a second: both outside, the second covers the window's start.
    at = calendar.timegm(time.strptime(second, "%Y%m%dT%H%M%SZ")) + 3600 + 1
    pruned = in_archive_pod(cluster, namespace, f"BACKUP_DIR=/backups BACKUP_RETENTION=1h NOW={at} sh /scripts/prune.sh")
    assert f"removed base backup {first}" in pruned, pruned
    assert in_archive_pod(cluster, namespace, listing).split() == [second]
    info = dict(line.split("=", 1) for line in in_archive_pod(cluster, namespace, f"cat /backups/base/{second}/info").split())
    segments = sorted(name[8:24] for name in in_archive_pod(cluster, namespace, "ls /backups/wal").split()
                      if len(name.split(".")[0]) == 24)
    assert segments[0] == info["start_wal"][8:], (segments, info)
    moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(info["end_epoch"]) + 1))
    restore_from_ha(cluster, namespace, "window-start", pointInTime=moment)
    assert rows(cluster, namespace, "window-start-0") == ROW_FACTS
    assert sql_at(cluster, namespace, "window-start-0", "select to_regclass('after_second') is null") == "t"


def test_a_deleted_database_is_recovered_to_its_last_commit_from_its_retained_archive(cluster, ha):
    """A row committed, five seconds, then the MyDatabase deleted (Retain: its volumes stay, its pods go): a new
    database restored from it, with no moment, has that row. The archive's lag is the RPO: it had it at once."""
    namespace, _ = ha
    primary = status(cluster, namespace)["primary"]
    committed = time.time()
    sql_at(cluster, namespace, primary, "create table last_words (said text); insert into last_words values ('bye')")
    archived_after = wait_for("the archive to have it", lambda: archived(cluster, namespace, primary) and time.time(),
                              timeout=30, interval=0.1) - committed
    print(f"\narchive had the last commit {archived_after:.2f}s after it (polled through kubectl exec)")
    time.sleep(5)
    cluster.kubectl("delete", "-n", namespace, "mydb/ha", "--timeout=120s")
    wait_for("ha's pods gone", lambda: not get_json(cluster, "-n", namespace, "pod", primary), timeout=120)
    assert get_json(cluster, "-n", namespace, "pvc", "ha-backups")
    restore_from_ha(cluster, namespace, "afterlife")
    assert sql_at(cluster, namespace, "afterlife-0", "select said from last_words") == "bye"


@pytest.fixture(scope="module")
def second(cluster, ha):
    """Another database in the module's namespace, for the tests that hang or lose its primary."""
    namespace, _ = ha
    # A walsender whose replica stopped confirming gives up after wal_sender_timeout, and a clean shutdown waits
    # for it: 10 s, not the default 60 s, for the switchover whose target is cut off.
    create(cluster, namespace, "two", failoverDelay=12, postgresql={"parameters": {"wal_sender_timeout": "10s"}})
    return namespace


def test_a_primary_that_stops_answering_for_less_than_failover_delay_keeps_its_role(cluster, ha, second):
    """failoverDelay 12 s; the primary hangs for 6 s (not ready after 2-3 s), then resumes: nothing is
    promoted, nothing recorded, and the database is Ready again with the same primary."""
    namespace = second
    pid = postgres_pid(cluster, namespace, "two-0")
    hang(pid)
    wait_for("two-0 not ready", lambda: condition(cluster, namespace, "Ready", "two").get("status") == "False",
             timeout=30, interval=0.2)
    time.sleep(3)  # the flap: longer than the readiness probe's, shorter than failoverDelay
    resume(pid)
    wait_ready(cluster, namespace, "two", timeout=60)
    assert status(cluster, namespace, "two")["targetPrimary"] == "two-0"
    assert not get_json(cluster, "-n", namespace, "configmap", "two-primary")
    assert not [e for e in events(cluster, namespace, "FailoverStarted") if e["involvedObject"]["name"] == "two"]


def test_a_database_unseen_longer_than_failover_delay_keeps_its_primary_when_it_comes_back(cluster, ha, second):
    """As on a node whose kubelet stopped (the node controller then marks every pod of it not ready): every pod
    of the database not ready at once, here each server hung, for 25 s, longer than failoverDelay (12 s).
    Nothing can take over meanwhile (NoEligibleReplica). The replicas come back a moment before the primary:
    failoverDelay counts from when a replica could first take over, not from when the primary stopped, and the
    primary, asked itself before anything is decided, answers. No failover, nothing recorded, the same primary.
    (The operator used to fail the healthy primary over the moment the replicas were ready again.)"""
    namespace = second
    pods = ("two-0", "two-1", "two-2")
    assert status(cluster, namespace, "two")["primary"] == "two-0"
    pids = {pod: postgres_pid(cluster, namespace, pod) for pod in pods}
    hung = time.monotonic()
    for pid in pids.values():
        hang(pid)

    def ready_pods() -> list[str]:
        listed = get_json(cluster, "-n", namespace, "pods", "-l", "app.kubernetes.io/instance=two")["items"]
        return [p["metadata"]["name"] for p in listed if any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]
    try:
        wait_for("every pod not ready", lambda: not ready_pods(), timeout=60, interval=0.5)
        wait_for("NoEligibleReplica", lambda: condition(cluster, namespace, "Failover", "two").get("reason")
                 == "NoEligibleReplica", timeout=30)
        time.sleep(max(0.0, 25 - (time.monotonic() - hung)))
    finally:
        resume(pids["two-1"])
        resume(pids["two-2"])
        try:
            wait_for("the replicas ready", lambda: {"two-1", "two-2"} <= set(ready_pods()), timeout=60,
                     interval=0.2)
            time.sleep(1)
        finally:
            resume(pids["two-0"])
    wait_ready(cluster, namespace, "two", timeout=60)
    assert status(cluster, namespace, "two")["targetPrimary"] == "two-0"
    assert not get_json(cluster, "-n", namespace, "configmap", "two-primary")
    assert not [e for e in events(cluster, namespace, "FailoverStarted") if e["involvedObject"]["name"] == "two"]
    assert primaries(cluster, namespace, list(pods)) == ["two-0"]


def test_a_primary_pod_that_cannot_come_back_is_replaced_and_keeps_what_it_cannot_rewind(cluster, ha, second):
    """The primary's pod is deleted and stays Terminating, as a lost node's pod does until the node is gone: its
    server stops, and no new pod of that name can start. A replica takes over; once the old pod is released,
    it returns as a replica of the new primary. (A finalizer holds it: cordoning the node would hold every
    other test's new pods on it too.)

    It had committed a tail the replicas never received (their WAL receivers hung), and while it is held
    the WAL pg_rewind needs is removed from its volume: its data cannot be rewound. It is kept aside, not
    deleted (it used to be): status and a Warning report it, the pod clones the new primary beside it, and
    the kept data starts by hand as docs/high-availability.md says, with the tail in it."""
    namespace = second
    # The switch to a new segment below puts the primary up to a segment (16 MB) ahead of the cut-off replicas.
    cluster.kubectl("patch", "-n", namespace, "mydb/two", "--type=merge", "-p",
                    '{"spec": {"failoverDelay": 0, "maxLagOnFailover": "64Mi"}}')
    write_rows(cluster, namespace, "two-0")
    for pod in ("two-1", "two-2"):
        wait_for(f"the rows on {pod}", lambda: rows(cluster, namespace, pod) == ROW_FACTS, timeout=30)
    held = False
    try:
        with stream_cut(cluster, namespace, "two-0", ["two-1", "two-2"]):
            # The tail, then a checkpoint in a new segment: crash recovery of the kept data starts there, while
            # pg_rewind must read back to a checkpoint before the fork, in the segments removed below.
            for statement in ("create table tail as select generate_series(1, 50) as id", "select pg_switch_wal()",
                              "checkpoint"):
                assert sql_at(cluster, namespace, "two-0", statement) is not None, statement
            redo = sql_at(cluster, namespace, "two-0", "select pg_walfile_name(redo_lsn) from pg_control_checkpoint()")
            cluster.kubectl("patch", "pod", "-n", namespace, "two-0", "--type=merge", "-p",
                            json.dumps({"metadata": {"finalizers": [LOST_NODE]}}))
            held = True
            cluster.kubectl("delete", "pod", "-n", namespace, "two-0", "--grace-period=1", "--wait=false")
            wait_for("two-0's server gone", lambda: not any(c.get("state", {}).get("running") for c in get_json(
                cluster, "-n", namespace, "pod", "two-0")["status"].get("containerStatuses") or []), timeout=60)
        wait_for("a new primary", lambda: status(cluster, namespace, "two").get("primary") in ("two-1", "two-2")
                 and condition(cluster, namespace, "Failover", "two").get("reason") == "Stable", timeout=120)
        new = status(cluster, namespace, "two")["primary"]
        other = next(p for p in ("two-1", "two-2") if p != new)
        # Writes go on through the read-write Service while the old pod cannot return.
        write = ('PGPASSWORD="$(cat "$CREDENTIALS_DIR/password")" PGCONNECT_TIMEOUT=2 '
                 "psql -h two -U postgres -d postgres -XAtqc \"insert into kept values (101, 'after') on conflict do nothing\"")
        wait_for("a write through the read-write Service", lambda: cluster.kubectl(
            "exec", "-n", namespace, other, "-c", "postgres", "--", "sh", "-c", write, check=False).returncode == 0,
            timeout=60)
        terminating = get_json(cluster, "-n", namespace, "pod", "two-0")
        assert terminating["metadata"].get("deletionTimestamp") and not any(c.get("state", {}).get("running") for c in (
            terminating["status"].get("containerStatuses") or [])), terminating["status"]
        assert condition(cluster, namespace, "Ready", "two")["status"] == "False"  # 2 of 3 pods: not Ready
        wal = volume_path(cluster, namespace, "data-two-0") / "pgdata" / "pg_wal"
        removed = [f for f in wal.iterdir() if re.fullmatch(r"[0-9A-F]{24}", f.name) and f.name < redo]
        assert removed, sorted(f.name for f in wal.iterdir())
        for segment in removed:
            segment.unlink()
    finally:
        if held:
            cluster.kubectl("patch", "pod", "-n", namespace, "two-0", "--type=json", "-p",
                            json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]), check=False)
    assert rows(cluster, namespace, new) == "101|5151"
    wait_for("two-0 back as a replica", lambda: sql_at(cluster, namespace, "two-0", "select pg_is_in_recovery()")
             == "t", timeout=150)
    settled(cluster, namespace, new, "two")
    [entry] = [i for i in status(cluster, namespace, "two")["instances"] if i["name"] == "two-0"]
    [kept] = entry.get("keptData") or [None]
    assert kept and kept["reason"] == "rewind-failed", entry
    told(cluster, namespace, "DivergedDataKept", name="two")
    assert rows(cluster, namespace, "two-0") == "101|5151"  # the clone: the new primary's data
    # The kept data, started by hand as docs/high-availability.md says, holds the tail no server has.
    directory = f"/var/lib/postgresql/data/{kept['directory']}"
    on_pod = ["exec", "-n", namespace, "two-0", "-c", "postgres", "--", "sh", "-c"]
    cluster.kubectl(*on_pod, f"rm -f {directory}/postmaster.pid && touch {directory}/standby.signal && "
                    f"pg_ctl -D {directory} -l /tmp/kept.log -w start -o \"-p 5433 -c listen_addresses='' "
                    "-c unix_socket_directories=/tmp -c primary_conninfo=''\"")
    try:
        counted = cluster.kubectl(*on_pod, 'PGPASSWORD="$(cat "$CREDENTIALS_DIR/password")" psql -h /tmp -p 5433 '
                                  '-U "$(cat "$CREDENTIALS_DIR/username")" -d postgres -XAtqc '
                                  '"select count(*) from tail"').stdout.strip()
        assert counted == "50", counted
    finally:
        cluster.kubectl(*on_pod, f"pg_ctl -D {directory} -m fast -w stop", check=False)


def volume_path(cluster, namespace: str, claim: str) -> Path:
    """Where CLAIM's volume is on this machine (the real node's `local` or hostPath PersistentVolume)."""
    volume = get_json(cluster, "pv", get_json(cluster, "-n", namespace, "pvc", claim)["spec"]["volumeName"])
    source = volume["spec"].get("local") or volume["spec"].get("hostPath")
    return Path(source["path"])


def test_an_operator_killed_in_the_middle_of_a_failover_finishes_it_after_a_restart(cluster, ha, second):
    """SIGKILL right after the operator recorded its decision: nothing promotes itself meanwhile; the restarted
    operator picks the failover up where the record says and the database ends with one primary, every row."""
    namespace, own = second, ha[1]
    old = status(cluster, namespace, "two")["primary"]
    write_rows(cluster, namespace, old, 102, 200)
    others = [p for p in ("two-0", "two-1", "two-2") if p != old]
    for pod in others:
        wait_for(f"the rows on {pod}", lambda: rows(cluster, namespace, pod) == "200|20100", timeout=30)
    pid = postgres_pid(cluster, namespace, old)
    hang(pid)
    try:
        wait_for("the decision", lambda: status(cluster, namespace, "two").get("targetPrimary") != old
                 or get_json(cluster, "-n", namespace, "configmap", "two-primary").get("data", {}).get("primary")
                 != old, timeout=60, interval=0.1)
        own.crash()
    finally:
        resume(pid)
    recorded = get_json(cluster, "-n", namespace, "configmap", "two-primary")["data"]["primary"]
    # With no operator, nothing promotes itself: at most the one promoted before the kill.
    assert wait_until(5, lambda: len(primaries(cluster, namespace, others)) > 1)
    own.start()
    settled(cluster, namespace, recorded, "two")
    assert primaries(cluster, namespace, ["two-0", "two-1", "two-2"]) == [recorded]
    assert rows(cluster, namespace, recorded) == "200|20100"


def test_a_replica_that_received_past_the_fork_is_rewound_onto_the_new_timeline_and_says_what_it_lost(
        cluster, ha, second):
    """A replica ahead of the one promoted, which it could not be: the stream to one replica is cut while the
    primary commits a tail, which the other receives; that one's server then stops answering (its postmaster
    hung: its WAL receiver goes on), so when the primary hangs the first one is promoted without the tail. The
    other, back, is on the old timeline past the fork and can never follow: once the promotion settled its pod
    is restarted, a Warning ReplicaDiverged names the WAL it discards, pg_rewind takes it onto the new
    timeline, and it streams from the new primary without the tail. (It used to crash-loop for good.)"""
    namespace = second
    old = status(cluster, namespace, "two")["primary"]
    promoted, diverging = sorted(p for p in ("two-0", "two-1", "two-2") if p != old)
    old_pid, diverging_pid = postgres_pid(cluster, namespace, old), postgres_pid(cluster, namespace, diverging)
    with stream_cut(cluster, namespace, old, [promoted]):
        assert sql_at(cluster, namespace, old, "create table past_fork as select generate_series(1, 50) as id"
                      ) is not None
        wait_for(f"the tail on {diverging}", lambda: sql_at(cluster, namespace, diverging,
                                                           "select count(*) from past_fork") == "50", timeout=30)
        hang(diverging_pid)
        try:
            wait_for(f"{diverging} not ready", lambda: not pod_ready(cluster, namespace, diverging), timeout=30)
            hang(old_pid)
            try:
                wait_for(f"{promoted} promoted", lambda: status(cluster, namespace, "two").get("primary") == promoted,
                         timeout=90)
            finally:
                resume(old_pid)
            wait_for(f"{old}'s server gone", lambda: postgres_pid_or_none(cluster, namespace, old) != old_pid,
                     timeout=60)
        finally:
            resume(diverging_pid)
    [diverged] = wait_for("ReplicaDiverged", lambda: [e for e in events(cluster, namespace, "ReplicaDiverged")
                                                      if diverging in e["message"]], timeout=120)
    # With the range when the operator read its position (it answered); else the pod's bootstrap log has it.
    assert diverged["type"] == "Warning" and ("discards" in diverged["message"]
                                              or "history forked" in diverged["message"]), diverged
    settled(cluster, namespace, promoted, "two")
    assert sql_at(cluster, namespace, diverging, "select to_regclass('past_fork') is null") == "t"
    assert "pg_rewind" in cluster.kubectl("logs", "-n", namespace, diverging, "-c", "bootstrap").stdout
    assert primaries(cluster, namespace, ["two-0", "two-1", "two-2"]) == [promoted]


def pod_ready(cluster, namespace: str, pod: str) -> bool:
    conditions = (get_json(cluster, "-n", namespace, "pod", pod).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_no_replica_within_max_lag_means_no_promotion_and_status_says_why(cluster, ha, second):
    """maxLagOnFailover 1Mi; the replicas' WAL receivers are stopped while the primary writes 4 MB; the
    primary hangs: nothing is promoted, the Failover condition and a Warning say why; once the primary
    resumes, it is Ready again as the same primary."""
    namespace = second
    # The test before may end while a pod it restarted is still starting: every replica streams first.
    settled(cluster, namespace, status(cluster, namespace, "two")["targetPrimary"], "two")
    earlier = len([e for e in events(cluster, namespace, "NoEligibleReplica") if e["involvedObject"]["name"] == "two"])
    cluster.kubectl("patch", "-n", namespace, "mydb/two", "--type=merge", "-p",
                    '{"spec": {"maxLagOnFailover": "1Mi", "failoverDelay": 0}}')
    primary = status(cluster, namespace, "two")["primary"]
    recorded = get_json(cluster, "-n", namespace, "configmap", "two-primary").get("metadata", {}).get(
        "resourceVersion")
    replicas = [p for p in ("two-0", "two-1", "two-2") if p != primary]
    receivers = [wait_for(f"{pod}'s WAL receiver", lambda: receiver_pid(cluster, namespace, pod), timeout=30)
                 for pod in replicas]
    for receiver in receivers:
        hang(receiver)
    try:
        sql_at(cluster, namespace, primary, "create table big as select repeat('x', 1000) as filler "
                                            "from generate_series(1, 4000)")
        wait_for("status to show the primary ahead", lambda: lag_bytes(cluster, namespace) > 2 * 2**20, timeout=90)
        # While the primary serves, status says the replicas could not take over: Degraded, naming them.
        degraded = wait_for("Degraded ReplicasBehind naming both replicas", lambda: (lambda c: c if c.get(
            "status") == "True" and all(pod in c.get("message", "") for pod in replicas) else None)(
            condition(cluster, namespace, "Degraded", "two")), timeout=60)
        assert degraded["reason"] == "ReplicasBehind", degraded
        assert condition(cluster, namespace, "Ready", "two")["reason"] != "AllReplicasReady"
        pid = postgres_pid(cluster, namespace, primary)
        hang(pid)
        try:
            wait_for("the refusal", lambda: condition(cluster, namespace, "Failover", "two").get("reason")
                     == "NoEligibleReplica", timeout=60)
            message = condition(cluster, namespace, "Failover", "two")["message"]
            # Behind by more than the limit, or, once the walsenders gave up on the hung receivers, not
            # streaming when the primary last answered: either way no replica may be promoted.
            assert ("maxLagOnFailover" in message or "not streaming" in message) and any(
                pod in message for pod in replicas), message
            told(cluster, namespace, "NoEligibleReplica", name="two", before=earlier)
            assert wait_until(5, lambda: get_json(cluster, "-n", namespace, "configmap", "two-primary")
                              .get("metadata", {}).get("resourceVersion") != recorded)
            assert status(cluster, namespace, "two")["targetPrimary"] == primary
        finally:
            resume(pid)
        # The replicas catch up only after the operator has seen the primary answer again: with
        # failoverDelay 0, a replica back within maxLagOnFailover while the primary's last probe
        # still failed would rightly be promoted (seen once under load).
        wait_for("the primary to answer again", lambda: condition(cluster, namespace, "Failover", "two").get(
            "reason") == "Stable", timeout=60)
    finally:
        for receiver in receivers:
            resume(receiver)
    wait_ready(cluster, namespace, "two", timeout=120)
    assert primaries(cluster, namespace, ["two-0", "two-1", "two-2"]) == [primary]
    wait_for("Degraded to clear once the replicas stream again", lambda: condition(
        cluster, namespace, "Degraded", "two").get("status") == "False", timeout=60)
    assert condition(cluster, namespace, "Ready", "two")["reason"] == "AllReplicasReady"


def test_a_switchover_to_a_replica_that_missed_the_last_wal_is_aborted_and_loses_nothing(cluster, ha, second):
    """The target streams, as far as the primary can tell, but receives nothing more (the link to it is cut on
    the bridge): the switchover is accepted, the primary shuts down cleanly, handing its last WAL to the other
    replica only. The target received less: it is not promoted (it would have lost that tail); the switchover
    is aborted with a Warning saying why, the old primary comes back as the primary, and every row a client was
    told committed is on it."""
    namespace = second
    primary = status(cluster, namespace, "two")["primary"]
    target, other = sorted(p for p in ("two-0", "two-1", "two-2") if p != primary)
    writer = Writer(cluster, namespace, "two")
    # Both ways: with the target's replies dropped too, the primary's walsender for it gives up after
    # wal_sender_timeout (10 s here), and the shutdown with it; the request goes in before that, while the
    # primary still lists the target as streaming.
    with stream_cut(cluster, namespace, primary, [target], both_ways=True):
        assert sql_at(cluster, namespace, primary, "create table tail_kept as select generate_series(1, 50) as id"
                      ) is not None
        cluster.kubectl("annotate", "-n", namespace, "mydb/two", f"myapp.example.com/switchover-to={target}")
        [aborted] = wait_for("SwitchoverAborted", lambda: [e for e in events(cluster, namespace, "SwitchoverAborted")
                                                            if e["involvedObject"]["name"] == "two"], timeout=180)
    assert aborted["type"] == "Warning" and f"switchover to {target} aborted" in aborted["message"], aborted
    assert f"{primary} stays the primary" in aborted["message"], aborted
    settled(cluster, namespace, primary, "two")
    writes = writer.halt()
    assert missing_writes(cluster, namespace, primary, writes) == []
    assert sql_at(cluster, namespace, primary, "select count(*) from tail_kept") == "50"
    assert primaries(cluster, namespace, ["two-0", "two-1", "two-2"]) == [primary]
    assert not [e for e in events(cluster, namespace, "SwitchoverCompleted") if e["involvedObject"]["name"] == "two"]
    assert "myapp.example.com/switchover-to" not in get_json(cluster, "-n", namespace, "mydb", "two")["metadata"].get(
        "annotations", {})


def postgres_pid_or_none(cluster, namespace: str, pod: str) -> int | None:
    """The host PID of POD's postmaster, or None while its container does not run."""
    try:
        return postgres_pid(cluster, namespace, pod)
    except (AssertionError, StopIteration, KeyError):
        return None


def receiver_pid(cluster, namespace: str, pod: str) -> int | None:
    """The host PID of POD's WAL receiver process; None while there is none (its container is starting too)."""
    try:
        postmaster = postgres_pid(cluster, namespace, pod)
    except (KeyError, StopIteration, AssertionError):  # no container ID yet, or no process of it on the host
        return None
    children = open(f"/proc/{postmaster}/task/{postmaster}/children").read().split()
    for child in children:
        try:
            if "walreceiver" in open(f"/proc/{child}/cmdline").read():
                return int(child)
        except OSError:
            continue
    return None


def lag_bytes(cluster, namespace: str) -> int:
    """The least replay lag of the replicas, as the status last written says."""
    found = [i for i in status(cluster, namespace, "two").get("instances") or [] if i.get("role") == "replica"]
    return min((i.get("lagBytes", 0) for i in found), default=0)


def test_synchronous_replication_loses_no_acknowledged_commit_across_a_failover(cluster, ha):
    """replication.synchronous: a commit returns once a replica has it. The primary hangs while the writer
    commits as fast as it can; after the failover every id the writer was told committed is there."""
    namespace, _ = ha
    create(cluster, namespace, "sync", replication={"synchronous": True})
    # The replicas by name, never the archive (a backup archive is no replica of the failover's).
    assert sql_at(cluster, namespace, "sync-0", "show synchronous_standby_names") == "ANY 1 ({})".format(
        ", ".join(f'"sync-{ordinal}"' for ordinal in range(16)))
    writer = Writer(cluster, namespace, "sync")
    time.sleep(2)  # commits under way when the primary hangs
    pid = postgres_pid(cluster, namespace, "sync-0")
    old_ip = pod_ip(cluster, namespace, "sync-0")
    hung = time.time()
    hang(pid)
    try:
        wait_for("a write on another server", lambda: writer.first_after(hung, old_ip), timeout=120)
    finally:
        resume(pid)
    writes = writer.halt()
    new = status(cluster, namespace, "sync")["targetPrimary"]
    acknowledged = [w for w in writes if w.ok]
    assert acknowledged and missing_writes(cluster, namespace, new, acknowledged) == []
    settled(cluster, namespace, new, "sync")


assert signal.SIGSTOP  # the tests above stop processes from the host: they run as root, like the real node
