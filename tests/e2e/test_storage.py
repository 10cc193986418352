"""Real volumes on real pods (hack/local_volumes.py: XFS of the claim's size): their usage in status, a full one,
and storageAutoGrow growing them before PostgreSQL runs out of space.

Each database's volumes are filled quickly by a ballast file beside PGDATA (fallocate, inside the postgres
container), then by rows PostgreSQL writes: what fills the disk last is the database itself."""

from __future__ import annotations

import json
import time

import pytest

from . import psql
from .conftest import wait_ready
from .realnode import images, on_real_node
from .test_faults import event_count, warning_events
from .test_metrics import scrape
from .test_real_postgres import (
    create_db,
    data_filesystem_size,
    pod_uid,
    sized_as_claimed,
    sql,
    streaming_replicas,
)
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
MI, GI = 2**20, 2**30
DATA = "/var/lib/postgresql/data"


def in_postgres(cluster, namespace: str, pod: str, line: str):
    return cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "sh", "-c", line, check=False)


def fill_to(cluster, namespace: str, pod: str, percent: float, name: str = "ballast") -> None:
    """Add a ballast file in POD's data volume so that PERCENT of it is used (df's figures)."""
    used, size = (int(x) for x in in_postgres(cluster, namespace, pod, f"df -B1 --output=used,size {DATA}")
                  .stdout.split()[-2:])
    missing = int(size * percent / 100) - used
    assert missing > 0, (pod, used, size, percent)
    done = in_postgres(cluster, namespace, pod, f"fallocate -l {missing} {DATA}/{name}")
    assert done.returncode == 0, done.stderr


def storage_status(cluster, namespace: str, name: str) -> dict:
    return (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("storage") or {}


def normal_events(cluster, namespace: str, name: str, reason: str) -> list[dict]:
    events = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"involvedObject.kind=MyDatabase,involvedObject.name={name},reason={reason}")
    return events.get("items", [])


def claim_sizes(cluster, namespace: str, name: str) -> list[str]:
    claims = get_json(cluster, "-n", namespace, "pvc", "-l",
                      f"app.kubernetes.io/instance={name},app.kubernetes.io/component=database")["items"]
    return sorted((c.get("status") or {}).get("capacity", {}).get("storage", "") for c in claims)


def insert_megabytes(cluster, namespace: str, primary: str, first: int, megabytes: int):
    """Rows of 1 KiB (incompressible enough: md5 text), about MEGABYTES of them, ids from FIRST."""
    last = first + megabytes * 1024 - 1
    return psql.run(cluster, namespace, primary,
                    "create table if not exists filler (id int primary key, pad text); "
                    f"insert into filler select i, repeat(md5(i::text), 32) from generate_series({first}, {last}) i",
                    stop_on_error=True)


@pytest.mark.long
def test_usage_in_status_auto_grow_before_postgresql_runs_out_and_growth_by_hand(cluster, real_operator,
                                                                                 namespace):
    """status.storage and the metrics show each pod's usage from its kubelet; past thresholdPercent every claim grows by the
    increment, online (same pods, `df` shows it), with an Event, and spec.storage stays as written; at the
    limit a Warning says it can grow no more. PostgreSQL never fails a write meanwhile. Raising spec.storage
    (and the limit) then grows both claims and their filesystems online as well, recorded as a Resize: the
    same pods, the rows on both, the replica still streaming."""
    name = "growing"
    grow = {"thresholdPercent": 70, "increment": "50%", "limit": "1536Mi", "intervalSeconds": 0}
    create_db(cluster, namespace, name, replicas=2, storage="1Gi", storageAutoGrow=grow)
    wait_ready(cluster, namespace, name, timeout=300)
    pods = (f"{name}-0", f"{name}-1")
    uids = {pod: pod_uid(cluster, namespace, pod) for pod in pods}
    wait_for("usage in status", lambda: {v["pod"] for v in storage_status(cluster, namespace, name)
                                         .get("volumes", [])} == set(pods), timeout=60)
    for volume in storage_status(cluster, namespace, name)["volumes"]:
        assert sized_as_claimed(volume["capacityBytes"], GI) and 0 < volume["usedBytes"] < volume["capacityBytes"]
    assert storage_status(cluster, namespace, name)["size"] == "1Gi"
    metrics = scrape(real_operator.metrics_port)
    for pod in pods:
        labels = f'{{database="{name}",namespace="{namespace}",pod="{pod}"}}'
        assert sized_as_claimed(int(metrics[f"mydb_volume_capacity_bytes{labels}"]), GI), metrics
        assert 0 < metrics[f"mydb_volume_used_bytes{labels}"] < GI

    for pod in pods:
        fill_to(cluster, namespace, pod, 66)
    written = insert_megabytes(cluster, namespace, f"{name}-0", 1, 40)  # the database itself crosses 70 %
    assert written.returncode == 0, written.stderr
    crossed = time.monotonic()
    wait_for("grown to 1536Mi", lambda: claim_sizes(cluster, namespace, name) == ["1536Mi", "1536Mi"], timeout=120)
    print(f"\nauto-grow: threshold crossed to claims grown in {time.monotonic() - crossed:.0f} s")
    (event,) = wait_for("the growth's Event", lambda: normal_events(cluster, namespace, name, "StorageAutoGrow"))
    assert "from 1Gi to 1536Mi" in event["message"] and "% full (threshold 70%)" in event["message"], event
    database = get_json(cluster, "-n", namespace, "mydb", name)
    assert database["spec"]["storage"] == "1Gi"
    assert database["status"]["storage"]["size"] == "1536Mi"
    assert database["status"]["storage"]["lastAutoGrowth"]["to"] == "1536Mi"
    wait_for("both filesystems grown", lambda: all(
        sized_as_claimed(data_filesystem_size(cluster, namespace, pod), 1536 * MI) for pod in pods), timeout=60)
    assert {pod: pod_uid(cluster, namespace, pod) for pod in pods} == uids, "growing restarted pods"
    wait_ready(cluster, namespace, name, timeout=120)

    for pod in pods:  # past the threshold again: the limit holds
        fill_to(cluster, namespace, pod, 75, name="more")
    wait_for("the limit Warning", lambda: warning_events(cluster, namespace, name, "StorageAutoGrowLimitReached"),
             timeout=90)
    (warning,) = warning_events(cluster, namespace, name, "StorageAutoGrowLimitReached")
    assert "storageAutoGrow.limit (1536Mi)" in warning["message"] and event_count([warning]) == 1
    assert storage_status(cluster, namespace, name)["limitReached"] is True
    assert claim_sizes(cluster, namespace, name) == ["1536Mi", "1536Mi"]
    assert len(normal_events(cluster, namespace, name, "StorageAutoGrow")) == 1
    assert sql(cluster, namespace, f"{name}-0", "select count(*) from filler") == str(40 * 1024)

    def last_operation() -> dict:
        return (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("lastOperation") or {}
    before = last_operation()
    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p",
                    json.dumps({"spec": {"storage": "2Gi", "storageAutoGrow": {"limit": "2Gi"}}}))
    wait_for("both claims at 2Gi", lambda: claim_sizes(cluster, namespace, name) == ["2Gi", "2Gi"], timeout=120)
    wait_for("the resize recorded as succeeded", lambda: last_operation() != before and (
        last_operation().get("type"), last_operation().get("result")) == ("Resize", "Succeeded"), timeout=120)
    wait_ready(cluster, namespace, name, timeout=120)
    assert {pod: pod_uid(cluster, namespace, pod) for pod in pods} == uids, "the resize restarted pods"
    wait_for("both filesystems at 2Gi", lambda: all(
        sized_as_claimed(data_filesystem_size(cluster, namespace, pod), 2 * GI) for pod in pods), timeout=60)
    written = insert_megabytes(cluster, namespace, f"{name}-0", 40 * 1024 + 1, 1)
    assert written.returncode == 0, written.stderr
    for pod in pods:
        wait_for(f"every row on {pod}", lambda: psql.run(cluster, namespace, pod, "select count(*) from filler")
                 .stdout.strip() == str(41 * 1024), timeout=30)
    assert streaming_replicas(cluster, namespace, f"{name}-0") == 1


def start_filler(cluster, namespace: str, claims: list[str]) -> None:
    """A pod beside each of the database's data claims, filler-I mounting the I-th at /vI: it fills them even
    while a server crash-loops (a WAL write that does not fit is a PANIC), when nothing can be run in its
    container. One pod per claim: a local volume is usable on its own node only, and the members are spread."""
    for index, claim in enumerate(claims):
        filler = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"filler-{index}"}, "spec": on_real_node({
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 999, "runAsNonRoot": True},
            "containers": [{"name": "main", "image": images()["POSTGRES_IMAGE"], "command": ["sleep", "3600"],
                            "volumeMounts": [{"name": "data", "mountPath": f"/v{index}"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(filler))
    for index in range(len(claims)):
        wait_for(f"filler-{index} running", lambda index=index: get_json(
            cluster, "-n", namespace, "pod", f"filler-{index}").get("status", {}).get("phase") == "Running",
                 timeout=120)


def fill_through_filler(cluster, namespace: str, mount: str, percent: float, name: str) -> None:
    """Add to MOUNT's ballast file NAME (/vI, through filler-I) so that PERCENT of the volume is used; nothing
    when it already is."""
    pod = f"filler-{mount.removeprefix('/v')}"
    line = f"df -B1 --output=used,size {mount}"
    used, size = (int(x) for x in cluster.kubectl("exec", "-n", namespace, pod, "--", "sh", "-c", line)
                  .stdout.split()[-2:])
    missing = int(size * percent / 100) - used
    if missing > 0:
        cluster.kubectl("exec", "-n", namespace, pod, "--", "fallocate", "-l", str(missing),
                        f"{mount}/{name}-{time.monotonic_ns()}", check=False)


@pytest.mark.long
def test_a_full_volume_degrades_without_failover_and_growth_brings_it_back(cluster, real_operator, namespace):
    """Rows inserted until PostgreSQL reports "No space left on device": Degraded/DiskFull naming the pods, one
    Warning, no failover (the replica's volume is as full, and the primary has every commit); once spec.storage
    grows, the same primary accepts writes again (restarted by the operator if it had crashed) and every
    committed row is there."""
    name = "filling"
    create_db(cluster, namespace, name, replicas=2, storage="1Gi")
    wait_ready(cluster, namespace, name, timeout=300)
    primary = f"{name}-0"
    start_filler(cluster, namespace, [f"data-{name}-0", f"data-{name}-1"])
    for mount in ("/v0", "/v1"):
        fill_through_filler(cluster, namespace, mount, 90, "ballast")
    committed, failure = 0, None
    for batch in range(40):
        written = insert_megabytes(cluster, namespace, primary, committed * 1024 + 1, 8)
        if written.returncode != 0:
            failure = written.stderr
            break
        committed += 8
    assert failure is not None and "No space left on device" in failure, failure
    print(f"\nfull disk: {committed} MiB of rows committed before PostgreSQL ran out of space")

    def degraded() -> dict | None:
        conditions = {c["type"]: c for c in get_json(cluster, "-n", namespace, "mydb", name)
                      .get("status", {}).get("conditions", [])}
        found = conditions.get("Degraded", {})
        return found if found.get("status") == "True" and found.get("reason") == "DiskFull" else None

    def kept_full() -> dict | None:
        """A server that crashed frees old WAL as it recovers: what it freed is taken again, as a database
        still writing would."""
        for mount in ("/v0", "/v1"):
            fill_through_filler(cluster, namespace, mount, 99.5, "more")
        found = degraded()
        return found if found and primary in found["message"] else None  # the replica's may be told first
    condition = wait_for("Degraded: DiskFull", kept_full, timeout=120, interval=5)
    # Named with its figures, or (a server down has none) with its last words.
    said = condition["message"]
    assert primary in said and ("% used" in said or "No space left on device" in said), condition
    # One Warning per change of what is full (a pod's figures, then its server's last words), not per pass.
    # The operator posts it after it stores the status (kopf sends Events from a queue): wait for the first.
    told = [(w.get("lastTimestamp"), w.get("count"), w["message"])
            for w in wait_for("the DiskFull Warning", lambda: warning_events(cluster, namespace, name, "DiskFull"),
                              timeout=15)]
    assert len(told) <= 3, "\n".join(map(str, told))
    time.sleep(10)  # the primary stays the primary: nothing to gain from a replica as full
    database = get_json(cluster, "-n", namespace, "mydb", name)
    assert database["status"].get("primary") == primary, database["status"]
    assert not warning_events(cluster, namespace, name, "FailoverStarted")

    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", '{"spec": {"storage": "2Gi"}}')
    wait_for("a write accepted again", lambda: insert_megabytes(
        cluster, namespace, primary, committed * 1024 + 1, 8).returncode == 0, timeout=240, interval=5)
    committed += 8
    wait_ready(cluster, namespace, name, timeout=180)
    assert sql(cluster, namespace, primary, "select count(*) from filler") == str(committed * 1024)
    wait_for("Degraded cleared", lambda: degraded() is None, timeout=60)
    # Whether its server stayed up (a data file could not grow) or crashed (WAL could not): the same primary.
    assert get_json(cluster, "-n", namespace, "mydb", name)["status"].get("primary") == primary
    assert not warning_events(cluster, namespace, name, "FailoverStarted")
