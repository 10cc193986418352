"""The seed database on real pods: PostgreSQL streams, and the Services route by role.

The operator runs as in the other e2e tests (a process under its
ServiceAccount, one namespace), with the platform configuration of
examples/platform-local-node.yaml: the database's pods land on the real node
and pull the Debian-built PostgreSQL from the loopback registry.
"""

from __future__ import annotations

import base64
import json
import re
import time

import pytest
import yaml

from . import psql
from .application import (as_client, change_the_application_password, check_the_application_role,
                          secret_keys)
from .conftest import wait_ready
from .realnode import NODE_NAMES, REGISTRY, REPO, images, on_real_node
from .waiting import get_json, printed, wait_for

pytestmark = pytest.mark.e2e
SEED = yaml.safe_load((REPO / "examples" / "production-db.yaml").read_text())


def run_sql(cluster, namespace: str, pod: str, query: str, *, host: str | None = None):
    """Run QUERY as the database's superuser over TCP (scram, as clients do): on POD's own server from the
    host (psql.py), or, given HOST, with psql inside POD to that address (a Service's name: its routing)."""
    if host is None:
        return psql.run(cluster, namespace, pod, query)
    line = ('PGPASSWORD="$(cat "$CREDENTIALS_DIR/password")" '
            f'psql -h {host} -U "$(cat "$CREDENTIALS_DIR/username")" -d postgres -XAtqc "{query}"')
    return cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "sh", "-c", line, check=False)


def sql(cluster, namespace: str, pod: str, query: str, *, host: str | None = None) -> str:
    result = run_sql(cluster, namespace, pod, query, host=host)
    assert result.returncode == 0, f"{pod}: {query}: {result.stderr}"
    return result.stdout.strip()


def answer(cluster, namespace: str, pod: str, query: str) -> str:
    """QUERY's output, or its error: to wait for on a replica, where a table made on the primary a moment ago
    may not have been replayed yet ("relation ... does not exist")."""
    result = run_sql(cluster, namespace, pod, query)
    return (result.stdout if result.returncode == 0 else result.stderr).strip()


@pytest.mark.long
def test_seed_streams_on_real_pods_and_its_lost_pods_come_back_clean_with_every_row(cluster, real_operator,
                                                                                    namespace):
    """3 real pods, ordinal 0 primary, both replicas streaming; a row written on the primary reaches every replica;
    the read-write Service lands on the primary, the read-only one on replicas only; the Secret's URIs work; the
    archive streams and the first base backup is taken. Then its primary's pod and a replica's are lost and come
    back clean (lose_the_primary_then_a_replica)."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(SEED))
    wait_ready(cluster, namespace, "production-db", timeout=300)

    pods = {p["metadata"]["name"]: p for p in get_json(cluster, "-n", namespace, "pods", "-l",
                                                         "app.kubernetes.io/instance=production-db")["items"]}
    members = sorted(name for name in pods if name.rsplit("-", 1)[0] == "production-db")
    assert members == ["production-db-0", "production-db-1", "production-db-2"]
    # Spread by default: one member on each real node.
    assert sorted(pods[name]["spec"]["nodeName"] for name in members) == NODE_NAMES
    assert all(pods[name]["spec"]["containers"][0]["image"].startswith(f"{REGISTRY}/library/postgres:15.2")
               for name in members)
    assert pods["production-db-0"]["metadata"]["labels"]["myapp.example.com/role"] == "primary"

    primary, replicas = "production-db-0", members[1:]
    assert sql(cluster, namespace, primary, "select pg_is_in_recovery()") == "f"
    number = int(sql(cluster, namespace, primary, "show server_version_num"))  # kubectl get's VERSION says it
    wait_for("VERSION printed", lambda: printed(cluster, namespace, "mydb", "production-db")["VERSION"]
             == f"{number // 10000}.{number % 10000}", timeout=30)
    for replica in replicas:
        assert sql(cluster, namespace, replica, "select pg_is_in_recovery()") == "t"
    wait_streaming(cluster, namespace, primary, 2)
    # Made with data checksums, the replicas cloned with them; status says so for each server.
    assert {sql(cluster, namespace, pod, "show data_checksums") for pod in members} == {"on"}
    wait_for("dataChecksums in status", lambda: [entry.get("dataChecksums") for entry in get_json(
        cluster, "-n", namespace, "mydb", "production-db")["status"].get("instances", [])] == [True] * 3, timeout=30)

    sql(cluster, namespace, primary, "create table seen (id int primary key, note text); "
                                     "insert into seen values (1, 'written on the primary')")
    for replica in replicas:
        wait_for(f"the row on {replica}", lambda: answer(cluster, namespace, replica, "select note from seen")
                 == "written on the primary", timeout=30)

    # Many connections through each Service: which kind of server answers.
    def answers(service: str) -> set[str]:
        return {sql(cluster, namespace, replicas[0], "select pg_is_in_recovery()",
                    host=f"{service}.{namespace}.svc.cluster.local") for _ in range(12)}
    assert answers("production-db") == {"f"}
    assert answers("production-db-ro") == {"t"}

    secret = get_json(cluster, "-n", namespace, "secret", "production-db-credentials")["data"]
    for key, in_recovery in (("uri", "f"), ("uri-ro", "t")):
        uri = base64.b64decode(secret[key]).decode()
        # The URIs ask for verify-full: libpq takes the CA from PGSSLROOTCERT, as a client would.
        assert uri.endswith("?sslmode=verify-full"), uri
        result = cluster.kubectl("exec", "-n", namespace, primary, "-c", "postgres", "--", "env",
                                 "PGSSLROOTCERT=/etc/mydatabase/tls/ca.crt", "psql", uri, "-Atc",
                                 "select pg_is_in_recovery()", check=False)
        assert result.returncode == 0 and result.stdout.strip() == in_recovery, (key, result.stderr)

    # The application's role: its Secret, a verify-full login through the Service, its database and no more.
    check_the_application_role(cluster, namespace, "production-db", replicas[0])
    change_the_application_password(cluster, namespace, "production-db", replicas[0], primary)

    # The seed's backups are continuous: the archive streams, and the first base backup was taken once Ready.
    assert pods["production-db-wal-0"]["spec"]["nodeName"] in NODE_NAMES
    wait_for("the archive streaming", lambda: ((get_json(cluster, "-n", namespace, "mydb", "production-db")
                                                ["status"].get("backup") or {}).get("archive") or {}).get("streaming"),
             timeout=60)
    backup = wait_for("the first base backup", lambda: (get_json(cluster, "-n", namespace, "mydb", "production-db")
                                                       ["status"].get("backup") or {}).get("lastSuccessfulJob"),
                      timeout=120)
    assert backup == get_json(cluster, "-n", namespace, "mydb", "production-db")["status"]["backup"]["firstBackupJob"]

    # The archive's pod stops on its SIGTERM (PID 1 is the script's shell, which must trap it), not at the end of
    # its 30 s grace period: every deletion, roll and drain of it waited that long.
    deleted = cluster.kubectl("delete", "pod", "-n", namespace, "production-db-wal-0", "--timeout=15s", check=False)
    assert deleted.returncode == 0, deleted.stderr

    lose_the_primary_then_a_replica(cluster, namespace, "production-db")
    # The role and its table are on whichever server is the primary now.
    app = secret_keys(cluster, namespace, "production-db-app")
    kept = as_client(cluster, namespace, "production-db-0", app["uri"], "select count(*) from mine")
    assert kept.returncode == 0 and kept.stdout.strip() == "1", kept.stderr


def test_database_elsewhere_stays_on_kwok(cluster, operator, namespace):
    """Without the platform config (the shared test operator), a database keeps running on the kwok nodes."""
    spec = {**SEED["spec"], "replicas": 1}
    body = {**SEED, "metadata": {"name": "simulated"}, "spec": spec}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait_ready(cluster, namespace, "simulated", timeout=120)
    node = get_json(cluster, "-n", namespace, "pod", "simulated-0")["spec"]["nodeName"]
    assert node.startswith("kwok-node-")


# --- Failures, backups and hibernation on real pods -------------------------------------------------------------

def row_facts(last: int) -> str:
    """What rows() reads once ids 1..LAST are written: their count and their sum."""
    return f"{last}|{last * (last + 1) // 2}"


ROW_FACTS = row_facts(100)  # the first write_rows


def create_db(cluster, namespace: str, name: str, **spec) -> None:
    """A MyDatabase like SEED (its backup schedule included, dumps only: the archive's pod and first base backup
    are the seed's and the failover tests' to prove), small, at 15.2, with SPEC's fields on top."""
    dumps_only = {**SEED["spec"]["backup"], "continuous": False}
    body = {**SEED, "metadata": {"name": name},
            "spec": {**SEED["spec"], "backup": dumps_only, "version": "15.2", "storage": "1Gi", **spec}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def write_rows(cluster, namespace: str, primary: str, first: int = 1, last: int = 100) -> None:
    """Insert ids FIRST..LAST into the table kept (created on first use) on PRIMARY."""
    sql(cluster, namespace, primary, "create table if not exists kept (id int primary key, note text); "
                                     f"insert into kept select i, 'row ' || i from generate_series({first}, {last}) i")


def rows(cluster, namespace: str, pod: str) -> str:
    """'count|sum of ids' of the table write_rows filled, as POD serves it (or why it cannot: a replica may not
    have replayed the table yet)."""
    return answer(cluster, namespace, pod, "select count(*), sum(id) from kept")


def ready_with_rows(cluster, namespace: str, name: str, **spec) -> None:
    """NAME at 2 pods (create_db, SPEC's fields on top), Ready, with write_rows on its primary and on its replica."""
    create_db(cluster, namespace, name, replicas=2, **spec)
    wait_ready(cluster, namespace, name, timeout=300)
    wait_streaming(cluster, namespace, f"{name}-0", 1)
    write_rows(cluster, namespace, f"{name}-0")
    wait_for("the rows on the replica", lambda: rows(cluster, namespace, f"{name}-1") == ROW_FACTS, timeout=30)


def streaming_replicas(cluster, namespace: str, primary: str) -> int:
    """The replicas streaming from PRIMARY (the continuous archive streams too, and is none of them)."""
    return int(sql(cluster, namespace, primary, "select count(*) from pg_stat_replication"
                   " where state = 'streaming' and application_name <> 'mydb-archive'"))


def wait_streaming(cluster, namespace: str, primary: str, replicas: int, timeout: float = 120) -> None:
    """Ready means every pod answers; a replica's WAL receiver may still be connecting (docs/real-node.md)."""
    wait_for(f"{replicas} replicas streaming from {primary}",
             lambda: streaming_replicas(cluster, namespace, primary) == replicas, timeout=timeout)


def ready_status(cluster, namespace: str, name: str) -> str:
    """The MyDatabase's Ready condition status ('True', 'False', or '' when it has none yet)."""
    conditions = (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


def pod_uid(cluster, namespace: str, pod: str) -> str:
    """The uid of POD while it exists and is not being deleted; '' otherwise."""
    found = get_json(cluster, "-n", namespace, "pod", pod)
    return "" if not found or found["metadata"].get("deletionTimestamp") else found["metadata"]["uid"]


def container_log(cluster, namespace: str, pod: str, container: str = "postgres") -> str:
    return cluster.kubectl("logs", "-n", namespace, pod, "-c", container).stdout


def delete_pod_and_wait_ready_again(cluster, namespace: str, name: str, pod: str, while_down=None) -> None:
    """Delete POD as a node drain would (graceful); the database must leave Ready, get a new POD, and be Ready.
    WHILE_DOWN, if given, runs once the database has left Ready, before the new POD is waited for."""
    old = pod_uid(cluster, namespace, pod)
    assert old, f"{pod} does not exist"
    assert ready_status(cluster, namespace, name) == "True"
    cluster.kubectl("delete", "-n", namespace, "pod", pod, "--wait=false")
    wait_for(f"mydb/{name} to leave Ready after deleting {pod}",
             lambda: ready_status(cluster, namespace, name) != "True", timeout=60, interval=0.2)
    if while_down:
        while_down()
    wait_for(f"a new {pod}", lambda: pod_uid(cluster, namespace, pod) not in ("", old), timeout=180)
    wait_ready(cluster, namespace, name, timeout=300)


def lose_the_primary_then_a_replica(cluster, namespace: str, name: str) -> None:
    """NAME (3 pods, ordinal 0 primary): deleting the primary pod shuts PostgreSQL down cleanly (the new pod's log
    says 'shut down at', with no crash recovery), status leaves Ready and comes back; the pod, coming back by itself
    within failoverDelay, is waited for (no failover), every row is on it and both replicas stream again.
    failoverDelay is set to 60 s first: with the default 3 s, a loaded CI machine once took longer than that to
    stop the old pod and schedule the new one, and a replica took over, as failoverDelay asks (the failover tests
    prove that path); deleting a replica pod likewise brings it back clean, and it catches up with rows written
    while it was down even though the primary switched WAL segments and checkpointed meanwhile (the primary keeps
    the WAL it needs)."""
    primary, replica = f"{name}-0", f"{name}-1"
    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"failoverDelay": 60}}')
    wait_for("failoverDelay 60 observed", lambda: (lambda d: (d.get("status") or {}).get("observedGeneration")
             == d["metadata"]["generation"])(get_json(cluster, "-n", namespace, "mydb", name)), timeout=60)
    wait_ready(cluster, namespace, name, timeout=120)
    write_rows(cluster, namespace, primary)
    assert rows(cluster, namespace, primary) == ROW_FACTS
    for pod in (f"{name}-1", f"{name}-2"):
        wait_for(f"the rows on {pod}", lambda: rows(cluster, namespace, pod) == ROW_FACTS, timeout=30)

    delete_pod_and_wait_ready_again(cluster, namespace, name, primary)
    assert sql(cluster, namespace, primary, "select pg_is_in_recovery()") == "f"
    assert get_json(cluster, "-n", namespace, "configmap", f"{name}-primary") == {}  # nothing moved
    assert rows(cluster, namespace, primary) == ROW_FACTS
    # The new primary has a new address. A replica that connects while DNS still names the old one gives up after
    # the TCP user timeout in its primary_conninfo (10 s; without it the kernel's 130 s) and asks again.
    wait_streaming(cluster, namespace, primary, 2)
    log = container_log(cluster, namespace, primary)
    assert "database system was shut down at" in log, log
    assert "database system was interrupted" not in log and "automatic recovery" not in log, log
    wait_for("the new pod labelled primary", lambda: get_json(cluster, "-n", namespace, "pod", primary)
             ["metadata"]["labels"].get("myapp.example.com/role") == "primary", timeout=30)

    def write_while_the_replica_is_down():
        wait_for(f"{replica} gone from pg_stat_replication",
                 lambda: streaming_replicas(cluster, namespace, primary) == 1, timeout=60, interval=0.2)
        write_rows(cluster, namespace, primary, 101, 200)
        sql(cluster, namespace, primary, "select pg_switch_wal()")
        write_rows(cluster, namespace, primary, 201, 300)
        sql(cluster, namespace, primary, "checkpoint")

    delete_pod_and_wait_ready_again(cluster, namespace, name, replica, while_down=write_while_the_replica_is_down)
    assert sql(cluster, namespace, replica, "select pg_is_in_recovery()") == "t"
    wait_for(f"{replica} to catch up with the rows written while it was down",
             lambda: rows(cluster, namespace, replica) == row_facts(300), timeout=60)
    wait_streaming(cluster, namespace, primary, 2)
    log = container_log(cluster, namespace, replica)
    assert "database system was shut down in recovery at" in log, log
    assert "database system was interrupted" not in log, log


def job_outcome(cluster, namespace: str, job: str) -> str:
    """'Complete' or 'Failed' once the Job has finished, '' before."""
    conditions = (get_json(cluster, "-n", namespace, "job", job).get("status") or {}).get("conditions") or []
    return next((c["type"] for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"), "")


def backup_status(cluster, namespace: str, name: str) -> dict:
    return (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("backup") or {}


def finished_phase(cluster, namespace: str, pod: str) -> str:
    """'Succeeded' or 'Failed' once POD has ended, '' before."""
    phase = (get_json(cluster, "-n", namespace, "pod", pod).get("status") or {}).get("phase", "")
    return phase if phase in ("Succeeded", "Failed") else ""


def run_on_real_node_with_backups(cluster, namespace: str, pod: str, claim: str, script: str) -> str:
    """Run SCRIPT (sh) in a PostgreSQL container on the real node with CLAIM mounted read-only at /backups;
    assert it succeeds and return its log."""
    spec = on_real_node({
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "check", "image": images()["POSTGRES_IMAGE"], "command": ["/bin/sh", "-c", script],
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "backups", "mountPath": "/backups", "readOnly": True}],
        }],
        "volumes": [{"name": "backups", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
    })
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod}, "spec": spec}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    phase = wait_for(f"pod {pod} to finish", lambda: finished_phase(cluster, namespace, pod), timeout=120)
    log = cluster.kubectl("logs", "-n", namespace, pod).stdout
    assert phase == "Succeeded", f"{pod} {phase}:\n{log}"
    return log


@pytest.mark.long
def test_backups_on_real_pods_a_failed_one_warns_once_and_an_on_demand_one_restores_into_a_new_database(
        cluster, real_operator, namespace):
    """A backup Job made from the database's CronJob whose pg_dump cannot reach a server (its PGHOST a Service with no
    endpoints, as when the primary is unreachable) really fails on the real node: BackupHealthy turns False naming
    the Job, status.backup records it, one Warning Event is posted. Then backup-now=<epoch> runs one backup Job on
    the real node that succeeds and makes it healthy again (no second Warning); its pg_dump file and a matching
    checksum are in the backups volume and hold the table; status.backup records the request and the success;
    a new MyDatabase restored from it (backup: latest) restores that very dump, becomes Ready and has every row,
    on its primary and on its replica."""
    name = "production-db"
    create_db(cluster, namespace, name, replicas=2)
    wait_ready(cluster, namespace, name, timeout=300)
    write_rows(cluster, namespace, f"{name}-0")
    fail_a_backup(cluster, namespace, name)

    token = str(int(time.time()))
    cluster.kubectl("annotate", "-n", namespace, f"mydb/{name}", f"myapp.example.com/backup-now={token}",
                    "--overwrite")
    job = wait_for("the on-demand Job in status.backup", lambda: (lambda b: b.get("lastOnDemandRequest") == token
                   and b.get("lastOnDemandJob"))(backup_status(cluster, namespace, name)), timeout=60)
    outcome = wait_for(f"Job {job} to finish", lambda: job_outcome(cluster, namespace, job), timeout=180)
    job_log = cluster.kubectl("logs", "-n", namespace, f"job/{job}", check=False)
    assert outcome == "Complete", f"{job}: {outcome}\n{job_log.stdout}{job_log.stderr}"
    job_pods = get_json(cluster, "-n", namespace, "pods", "-l", f"job-name={job}")["items"]
    assert job_pods and all(p["spec"]["nodeName"] in NODE_NAMES for p in job_pods)
    written = re.search(r"backup: wrote /backups/(\d{8}T\d{6}Z\.dump) ", job_log.stdout)
    assert written, job_log.stdout
    dump = written.group(1)

    wait_for("status.backup records the success", lambda: backup_status(cluster, namespace, name)
             .get("lastSuccessfulJob") == job, timeout=60)
    assert backup_status(cluster, namespace, name).get("lastSuccessfulTime")
    wait_for("BackupHealthy True again", lambda: backup_condition(cluster, namespace, name).get("status") == "True",
             timeout=60)
    assert backup_condition(cluster, namespace, name)["reason"] == "BackupSucceeded"
    assert backup_warnings(cluster, namespace, name) == 1

    listing = run_on_real_node_with_backups(
        cluster, namespace, "backup-check", f"{name}-backups",
        f"cd /backups && ls -1 && sha256sum -c {dump}.sha256 && pg_restore -l {dump}")
    assert dump in listing.split() and f"{dump}.sha256" in listing.split(), listing
    assert f"{dump}: OK" in listing, listing
    assert re.search(r"TABLE DATA public kept ", listing), listing

    create_db(cluster, namespace, "restored", replicas=2, restore={"fromDatabase": name, "backup": "latest"})
    wait_ready(cluster, namespace, "restored", timeout=300)
    # The first boot restores in the init container, before the server's container starts.
    assert dump in container_log(cluster, namespace, "restored-0", "bootstrap")
    assert rows(cluster, namespace, "restored-0") == ROW_FACTS
    assert sql(cluster, namespace, "restored-1", "select pg_is_in_recovery()") == "t"
    assert rows(cluster, namespace, "restored-1") == ROW_FACTS


def backup_condition(cluster, namespace: str, name: str) -> dict:
    conditions = (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "BackupHealthy"), {})


def backup_warnings(cluster, namespace: str, name: str) -> int:
    events = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"involvedObject.kind=MyDatabase,involvedObject.name={name},type=Warning")["items"]
    return sum(e.get("count", 1) for e in events if e["reason"] == "BackupFailed")


def fail_a_backup(cluster, namespace: str, name: str) -> None:
    """Run a Job of NAME's backup CronJob pointed at a Service with no endpoints; see it fail on the real node,
    BackupHealthy turn False naming it, status.backup record it, one Warning told."""
    # A Service that selects nothing: connections to it are refused, as they are to a primary that is down.
    unreachable = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "no-primary"},
                   "spec": {"selector": {"app.kubernetes.io/instance": "nothing"}, "ports": [{"port": 5432}]}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(unreachable))

    template = get_json(cluster, "-n", namespace, "cronjob", f"{name}-backup")["spec"]["jobTemplate"]
    container = template["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{**e, "value": "no-primary"} if e["name"] == "PGHOST" else e for e in container["env"]]
    # The scripts wait up to a minute for a server that is not admitted yet (credentials.sh): none ever answers here.
    container["env"].append({"name": "SERVER_WAIT_SECONDS", "value": "2"})
    failing = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{name}-backup-unreachable", "labels": template["metadata"]["labels"]},
               "spec": {**template["spec"], "backoffLimit": 0}}  # the chart's retry, 10 s later, would fail alike
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(failing))
    job = failing["metadata"]["name"]
    outcome = wait_for(f"Job {job} to finish", lambda: job_outcome(cluster, namespace, job), timeout=180)
    assert outcome == "Failed"
    job_pods = get_json(cluster, "-n", namespace, "pods", "-l", f"job-name={job}")["items"]
    assert job_pods and all(p["spec"]["nodeName"] in NODE_NAMES for p in job_pods)
    log = cluster.kubectl("logs", "-n", namespace, job_pods[0]["metadata"]["name"]).stdout
    assert "pg_dump: error: connection to server" in log, log

    wait_for("BackupHealthy False", lambda: backup_condition(cluster, namespace, name).get("reason") == "BackupFailed",
             timeout=120)
    condition = backup_condition(cluster, namespace, name)
    assert condition["status"] == "False" and job in condition["message"], condition
    assert backup_status(cluster, namespace, name)["lastFailedJob"] == job
    wait_for("a BackupFailed Warning", lambda: backup_warnings(cluster, namespace, name) >= 1, timeout=60)


def data_filesystem_size(cluster, namespace: str, pod: str) -> int:
    """The size in bytes `df` shows inside POD for PostgreSQL's data volume."""
    shown = cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--",
                            "df", "-B1", "--output=size", "/var/lib/postgresql/data").stdout
    return int(shown.split()[-1])


def sized_as_claimed(size: int, claimed: int) -> bool:
    """A filesystem of the claim's size: no larger, and less only by XFS's own log and metadata."""
    return 0.9 * claimed <= size <= claimed


@pytest.mark.long
def test_postgresql_17_hibernates_wakes_and_is_adopted_again_after_its_deletion_with_its_rows(
        cluster, real_operator, namespace):
    """A database at the version of the Debian 13 build (17.N) pulls library/postgres:17.N from the local registry
    and runs it for real: the server says 17, the replica streams and has the rows. hibernate: true stops every
    real pod (phase Hibernated, Ready False, claims kept); false brings the database back Ready with every row on
    the primary and the replica, the primary having been shut down cleanly. Deleting the MyDatabase
    (deletionPolicy Retain, the default) stops its pods and keeps its claims and credentials; applying it again
    adopts them: the same Secret, the same rows on the primary and the replica. One database goes through the
    three, each step from where the last left it."""
    image = images()["POSTGRES17_IMAGE"]
    version = image.rsplit(":", 1)[1]
    name = "pg17"
    ready_with_rows(cluster, namespace, name, version=version)
    for pod in (f"{name}-0", f"{name}-1"):
        assert get_json(cluster, "-n", namespace, "pod", pod)["spec"]["containers"][0]["image"] == image
    assert sql(cluster, namespace, f"{name}-0", "show server_version").startswith(f"{version} ")
    assert sql(cluster, namespace, f"{name}-1", "select pg_is_in_recovery()") == "t"

    hibernate_and_wake(cluster, namespace, name)
    delete_and_apply_again(cluster, namespace, name, version=version)


def hibernate_and_wake(cluster, namespace: str, name: str) -> None:
    """hibernate: true, then false; the rows written by ready_with_rows are on both pods afterwards."""
    def database_pods() -> list[str]:
        return [p["metadata"]["name"] for p in get_json(cluster, "-n", namespace, "pods", "-l",
                f"app.kubernetes.io/instance={name},app.kubernetes.io/component=database")["items"]]

    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"hibernate": true}}')
    wait_for("phase Hibernated with no pods", lambda: not database_pods() and (
        get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("phase") == "Hibernated",
        timeout=180)
    assert ready_status(cluster, namespace, name) == "False"
    claims = get_json(cluster, "-n", namespace, "pvc", "-l",
                      f"app.kubernetes.io/instance={name},app.kubernetes.io/component=database")["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == [f"data-{name}-0", f"data-{name}-1"]

    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"hibernate": false}}')
    wait_ready(cluster, namespace, name, timeout=300)
    assert rows(cluster, namespace, f"{name}-0") == ROW_FACTS
    assert rows(cluster, namespace, f"{name}-1") == ROW_FACTS
    log = container_log(cluster, namespace, f"{name}-0")
    assert "database system was shut down at" in log and "database system was interrupted" not in log, log


def delete_and_apply_again(cluster, namespace: str, name: str, **spec) -> None:
    """Delete the MyDatabase (made by ready_with_rows with SPEC), then apply it again: adopted, rows and all."""
    secret_uid = get_json(cluster, "-n", namespace, "secret", f"{name}-credentials")["metadata"]["uid"]

    cluster.kubectl("delete", "-n", namespace, f"mydb/{name}", "--timeout=120s")
    wait_for("the pods gone", lambda: not get_json(cluster, "-n", namespace, "pods", "-l",
                                                   f"app.kubernetes.io/instance={name}")["items"], timeout=120)
    claims = sorted(c["metadata"]["name"] for c in get_json(cluster, "-n", namespace, "pvc")["items"])
    assert claims == [f"data-{name}-0", f"data-{name}-1", f"{name}-backups"], claims

    create_db(cluster, namespace, name, replicas=2, **spec)
    wait_ready(cluster, namespace, name, timeout=300)
    assert get_json(cluster, "-n", namespace, "secret", f"{name}-credentials")["metadata"]["uid"] == secret_uid
    assert rows(cluster, namespace, f"{name}-0") == ROW_FACTS
    assert sql(cluster, namespace, f"{name}-1", "select pg_is_in_recovery()") == "t"
    assert rows(cluster, namespace, f"{name}-1") == ROW_FACTS
    log = container_log(cluster, namespace, f"{name}-0")
    assert "database system was shut down at" in log and "database system was interrupted" not in log, log
