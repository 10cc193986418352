"""Nodes that stop answering and come back, a primary's node cut off, a primary's node lost, and the API server
away, on the real nodes.

Every real node's kubelet is stopped (SIGSTOP) for longer than the node
controller's grace, and for the same time the host, where the operator runs,
cannot reach any primary's pod (iptables drops what it sends there). Every
container keeps running: clients beside the servers keep writing to each
primary directly, and through the read-write Service until the node controller
marks every pod not ready. The kubelets and the link then come back together.

Two databases share the one blip: `current`, whose replicas stream, and
`stale`, whose only replica stopped receiving WAL well past `wal_keep_size`
before the blip. Neither may fail over, on the blip or on the return (the
operator once failed a healthy primary over to a replica 1 GB behind the
moment the node came back, and deleted the only copy of 868 acknowledged
commits); every acknowledged row must be on the primary at the end, and on
the replicas once they caught up. Then `current`'s primary's node is cut off
(the primary must stop itself before a replica is promoted), the new primary's
node is lost (a power cut: a replica elsewhere takes over, and the node,
brought back, rejoins), and the API server stops for 30 s (no primary may
stop). A serial test: whole nodes stop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import wait_ready
from .primaries import (
    LocalWriter,
    Writer,
    cluster_pid,
    cut_off,
    hang,
    missing_writes,
    pod_ip,
    postgres_pid,
    primaries,
    resume,
    sql_at,
    stopped,
    wait_until,
)
from .nodes import node_fault, node_of
from .realnode import NODE_NAMES
from .test_failover import condition, events, receiver_pid, status
from .test_real_postgres import wait_streaming
from .waiting import get_json, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.serial]
DATABASES = {
    "current": {"replicas": 3},
    # wal_keep_size small, so that what the stale replica misses is past it: only its slot keeps that WAL.
    "stale": {"replicas": 2, "postgresql": {"parameters": {"wal_keep_size": "16MB"}}},
}
ROLE_LABEL = "myapp.example.com/role"


def test_a_node_that_stops_answering_keeps_its_primaries_and_every_acknowledged_row(cluster, real_operator, namespace):
    for name, spec in DATABASES.items():
        body = {
            "apiVersion": "myapp.example.com/v1",
            "kind": "MyDatabase",
            "metadata": {"name": name},
            "spec": {"version": "15.2", "storage": "1Gi", **spec},
        }
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    for name, spec in DATABASES.items():
        wait_ready(cluster, namespace, name, timeout=300)
        wait_streaming(cluster, namespace, f"{name}-0", spec["replicas"] - 1)
    pods = {name: [f"{name}-{i}" for i in range(spec["replicas"])] for name, spec in DATABASES.items()}
    addresses = {name: pod_ip(cluster, namespace, f"{name}-0") for name in DATABASES}
    writers = [
        Writer(cluster, namespace, name, f"{name}-{how}", host=address, pause=0.2)
        for name in DATABASES
        for how, address in (("service", ""), ("direct", addresses[name]))
    ]

    # The stale replica's WAL receiver hangs (its pod stays ready) while its primary writes 4 x wal_keep_size.
    receiver = wait_for("stale-1's WAL receiver", lambda: receiver_pid(cluster, namespace, "stale-1"), timeout=30)
    hang(receiver)
    try:
        sql_at(
            cluster,
            namespace,
            "stale-0",
            "create table filler as select repeat('x', 1000) as filler from generate_series(1, 60000)",
        )
        behind = wait_for(
            "Degraded ReplicasBehind naming stale-1",
            lambda: (
                lambda c: c if c.get("reason") == "ReplicasBehind" and "stale-1" in c.get("message", "") else None
            )(condition(cluster, namespace, "Degraded", "stale")),
            timeout=60,
        )
        assert behind["status"] == "True", behind
        assert condition(cluster, namespace, "Ready", "stale")["reason"] != "AllReplicasReady"
        # (A replica ready less than 30 s ago is still connecting: judged once it has settled.)
        wait_for(
            "stale-1 out of the read-only Service", lambda: role(cluster, namespace, "stale-1") == "lagging", timeout=60
        )
        wait_for(
            "the metrics to say so",
            lambda: replica_metrics(real_operator, namespace, "stale").get("stale-1", (0, 0))[1] == 1,
            timeout=30,
        )
        primaries_before = {name: status(cluster, namespace, name)["primary"] for name in DATABASES}
        assert primaries_before == {"current": "current-0", "stale": "stale-0"}

        out = blip(cluster, namespace, list(addresses.values()), pods)

        wait_ready(cluster, namespace, "current", timeout=120)
        # No failover on the return either: the primaries answer as primaries, and are kept.
        assert wait_until(20, lambda: any(failovers(cluster, namespace, name) for name in DATABASES))
        for name in DATABASES:
            assert status(cluster, namespace, name)["primary"] == f"{name}-0"
            assert primaries(cluster, namespace, pods[name]) == [f"{name}-0"]
        # Once its pod has settled again (it turned ready on the return), the stale replica is named again.
        wait_for(
            "Degraded naming stale-1 again",
            lambda: (lambda c: c.get("status") == "True" and "stale-1" in c.get("message", ""))(
                condition(cluster, namespace, "Degraded", "stale")
            ),
            timeout=60,
        )
        assert role(cluster, namespace, "stale-1") == "lagging"
    finally:
        resume(receiver)
    wait_for(
        "stale-1 streaming and caught up: Degraded clears",
        lambda: condition(cluster, namespace, "Degraded", "stale").get("status") == "False",
        timeout=120,
    )
    wait_ready(cluster, namespace, "stale", timeout=60)
    wait_for(
        "stale-1 back in the read-only Service", lambda: role(cluster, namespace, "stale-1") == "replica", timeout=30
    )
    wait_for(
        "the metrics to say so",
        lambda: replica_metrics(real_operator, namespace, "stale").get("stale-1", (0, 1))[1] == 0,
        timeout=30,
    )

    made = {writer.name: writer.halt() for writer in writers}
    for writer, writes in made.items():
        name = writer.split("-")[0]
        acknowledged = [w for w in writes if w.ok]
        assert acknowledged, f"{writer} had no write acknowledged"
        for pod in pods[name]:
            wait_for(
                f"{writer}'s acknowledged rows on {pod}",
                lambda pod=pod, writes=writes: not missing_writes(cluster, namespace, pod, writes),
                timeout=60,
            )
    # The primaries served their direct clients while the node was out: the blip lost no client of theirs.
    for name in DATABASES:
        direct = [w for w in made[f"{name}-direct"] if w.ok and out[0] < w.at < out[1]]
        assert direct, f"no write acknowledged directly by {name}-0 during the blip"
    # The same node, cut off for good this time from current-0's side; then the API server away.
    a_cut_off_primary_stops_taking_writes_before_a_replica_is_promoted(cluster, namespace, "current")


def blip(cluster, namespace: str, cut: list[str], pods: dict[str, list[str]]) -> tuple[float, float]:
    """The kubelet stopped and the host cut from the addresses CUT, past the node's grace: the node Unknown,
    every pod of it not ready, the operator saying why it does not fail over; then both back at once.
    Returns when it began and ended (time.time())."""
    kubelets = [cluster_pid(cluster, f"kubelet-{index}") for index in range(1, len(NODE_NAMES) + 1)]
    # In the raw table: before any other rule of the host.
    rules = [["OUTPUT", "-d", f"{address}/32", "-j", "DROP"] for address in cut]
    for rule in rules:
        subprocess.run(["iptables", "-w", "-t", "raw", "-I", *rule], check=True)
    for kubelet in kubelets:
        os.kill(kubelet, signal.SIGSTOP)
    began = time.time()
    try:
        for name in pods:  # the host, where the operator runs, cannot reach a primary
            assert sql_at(cluster, namespace, f"{name}-0", "select 1") is None
        wait_for("the nodes Unknown", lambda: nodes_ready(cluster) == {"Unknown"}, timeout=120, interval=1)
        every = [pod for listed in pods.values() for pod in listed]
        wait_for("every pod not ready", lambda: not [p for p in every if pod_ready(cluster, namespace, p)], timeout=30)
        for name in pods:
            wait_for(
                f"{name}: no failover, and why",
                lambda name=name: condition(cluster, namespace, "Failover", name).get("reason") == "NoEligibleReplica",
                timeout=30,
            )
        time.sleep(10)  # past failoverDelay and a resync with nothing to see
        for name in pods:
            assert not failovers(cluster, namespace, name)
    finally:
        for kubelet in kubelets:
            os.kill(kubelet, signal.SIGCONT)
        for rule in rules:
            subprocess.run(["iptables", "-w", "-t", "raw", "-D", *rule], check=False)
    ended = time.time()
    wait_for("the nodes Ready again", lambda: nodes_ready(cluster) == {"True"}, timeout=60, interval=1)
    return began, ended


def failovers(cluster, namespace: str, name: str) -> list[dict]:
    return [e for e in events(cluster, namespace, "FailoverStarted") if e["involvedObject"]["name"] == name]


def nodes_ready(cluster) -> set[str]:
    """The real nodes' Ready conditions, as a set (one value when they agree)."""
    found = set()
    for name in NODE_NAMES:
        conditions = get_json(cluster, "node", name).get("status", {}).get("conditions") or []
        found.add(next((c["status"] for c in conditions if c["type"] == "Ready"), ""))
    return found


def pod_ready(cluster, namespace: str, pod: str) -> bool:
    conditions = get_json(cluster, "-n", namespace, "pod", pod).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def role(cluster, namespace: str, pod: str) -> str:
    return get_json(cluster, "-n", namespace, "pod", pod)["metadata"].get("labels", {}).get(ROLE_LABEL, "")


def replica_metrics(operator, namespace: str, database: str) -> dict[str, tuple[float, float]]:
    """Pod -> (mydb_replica_lag_bytes, mydb_replica_behind), as the operator's /metrics says."""
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in ("mydb_replica_lag_bytes", "mydb_replica_behind"):
            continue
        for sample in family.samples:
            if sample.labels.get("namespace") == namespace and sample.labels.get("database") == database:
                found.setdefault(sample.labels["pod"], {})[family.name] = sample.value
    return {pod: (v.get("mydb_replica_lag_bytes", -1), v.get("mydb_replica_behind", -1)) for pod, v in found.items()}


def a_cut_off_primary_stops_taking_writes_before_a_replica_is_promoted(cluster, namespace: str, name: str) -> None:
    """NAME-0's node is cut off (its link down: its pods reach only each other; the API server, the operator and
    the replicas on the other nodes cannot reach them, nor they those): its kubelet can never confirm the old
    primary was killed. A client on the node keeps writing to the old primary over its unix socket. The old
    primary stops its own server once it cannot confirm the primary lease (lease.pl, within fenceSeconds of the
    cut), and the operator promotes a replica on another node only after the lease named it longer than that:
    no row is acknowledged by the old primary once the new one takes writes (48 were, before the lease)."""
    wait_streaming(cluster, namespace, f"{name}-0", 2, timeout=120)
    wait_for(f"the lease naming {name}-0", lambda: lease_holder(cluster, namespace, name) == f"{name}-0", timeout=30)
    node = node_of(cluster, namespace, f"{name}-0")
    service = Writer(cluster, namespace, name, f"{name}-service", pause=0.1, away_from=node.name)
    old_address = pod_ip(cluster, namespace, f"{name}-0")
    postmaster = postgres_pid(cluster, namespace, f"{name}-0")
    local = LocalWriter(postmaster)
    with node_fault("cut", node) as began:
        try:
            stopped_at = wait_for(
                "the old postmaster gone",
                lambda: None if os.path.exists(f"/proc/{postmaster}") else time.time(),
                timeout=30,
                interval=0.1,
            )
        except AssertionError as failed:
            said = pod_log(namespace, f"{name}-0", "probe")
            raise AssertionError(f"{failed}\nits lease.pl said:\n{said}") from None
        new = wait_for(
            "a replica promoted",
            lambda: (lambda s: s.get("primary") if s.get("primary") not in (None, f"{name}-0") else None)(
                status(cluster, namespace, name)
            ),
            timeout=90,
        )
        first_new = wait_for(
            f"a write acknowledged by {new}",
            lambda: service.first_after(began, old_address, from_node=True),
            timeout=30,
        )
        assert node_of(cluster, namespace, new) != node
    local.stop()
    last_old = local.acknowledged()[-1]
    # The old primary refused writes within its deadline (fenceSeconds 6, counted from its last confirmation
    # before the cut; then a fast shutdown, and an immediate one 3 s later as its walsenders wait for replicas
    # it cannot reach), and nothing it acknowledged came after a write of the new one.
    assert last_old - began < 7, f"the cut-off primary acknowledged writes for {last_old - began:.1f}s"
    assert stopped_at - began < 11, f"the cut-off primary's server ran {stopped_at - began:.1f}s"
    assert last_old < first_new.at, (last_old, first_new)
    assert lease_holder(cluster, namespace, name) == new
    # The node back, the old primary comes back as a replica of the new one; every row acknowledged by the
    # Service is kept.
    assert failovers(cluster, namespace, name)
    wait_ready(cluster, namespace, name, timeout=180)
    writes = service.halt()
    wait_for(
        "every row acknowledged through the Service on the new primary",
        lambda: not missing_writes(cluster, namespace, new, [w for w in writes if w.ok]),
        timeout=60,
    )
    wait_streaming(cluster, namespace, new, 2, timeout=120)
    a_lost_node_hands_its_primary_to_another_and_rejoins(cluster, namespace, name, new)


def a_lost_node_hands_its_primary_to_another_and_rejoins(cluster, namespace: str, name: str, primary: str) -> None:
    """PRIMARY's node is lost (a power cut: its kubelet, containerd and containers killed, its link down). The
    operator, which no longer hears the primary's server and sees the lease unrenewed, promotes a replica on
    another node once the old primary's deadline has passed, long before the node controller's grace; the node,
    brought back, rejoins, its pod a replica of the new primary; every row acknowledged through the Service is
    on the new primary."""
    node = node_of(cluster, namespace, primary)
    service = Writer(cluster, namespace, name, f"{name}-lost", pause=0.1, away_from=node.name)
    old_address = pod_ip(cluster, namespace, primary)
    with node_fault("lose", node) as began:
        new = wait_for(
            "a replica promoted",
            lambda: (lambda s: s.get("primary") if s.get("primary") not in (None, primary) else None)(
                status(cluster, namespace, name)
            ),
            timeout=90,
        )
        wait_for(f"a write acknowledged by {new}", lambda: service.first_after(began, old_address), timeout=30)
        assert node_of(cluster, namespace, new) != node
        promoted = [e for e in events(cluster, namespace, "Promoted") if e["involvedObject"]["name"] == name]
        assert promoted and "stopped" in promoted[-1]["message"], promoted
    wait_ready(cluster, namespace, name, timeout=240)
    writes = service.halt()
    wait_for(
        "every row acknowledged through the Service on the new primary",
        lambda: not missing_writes(cluster, namespace, new, [w for w in writes if w.ok]),
        timeout=60,
    )
    wait_streaming(cluster, namespace, new, 2, timeout=120)
    assert primaries(cluster, namespace, [f"{name}-{i}" for i in range(3)]) == [new]
    api_server_away_stops_no_primary(cluster, namespace, new)


def api_server_away_stops_no_primary(cluster, namespace: str, primary: str) -> None:
    """The API server stopped for 30 s (SIGSTOP: every request to it hangs, as in a control-plane restart):
    no primary can renew its lease, and its replicas, whose reads fail too, vouch for it. It keeps serving: a
    client beside it has writes acknowledged throughout."""
    postmaster = postgres_pid(cluster, namespace, primary)
    local = LocalWriter(postmaster)
    with stopped(cluster_pid(cluster, "kube-apiserver")):
        began = time.time()
        time.sleep(30)
    ended = time.time()
    time.sleep(2)
    local.stop()
    assert os.path.exists(f"/proc/{postmaster}"), "the primary stopped while the API server was away"
    during = [at for at in local.acknowledged() if began < at < ended]
    gaps = [later - earlier for earlier, later in zip([began, *during], [*during, ended], strict=True)]
    assert during and max(gaps) < 3, f"{len(during)} writes while the API server was away, longest gap {max(gaps):.1f}s"


def pod_log(namespace: str, pod: str, container: str) -> str:
    """The container's log as the kubelet keeps it on the node (readable while the kubelet is stopped)."""
    found = sorted(Path("/var/log/pods").glob(f"*/{namespace}_{pod}_*/{container}/*.log"))
    return "".join(path.read_text()[-3000:] for path in found) or "(no log found)"


def lease_holder(cluster, namespace: str, name: str) -> str:
    found = cluster.kubectl("get", "lease", "-n", namespace, f"{name}-primary", "-o", "json", check=False)
    return json.loads(found.stdout)["spec"].get("holderIdentity", "") if found.returncode == 0 else ""
