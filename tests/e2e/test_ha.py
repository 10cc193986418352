"""Never two operators acting on one database.

Two instances of one Lease: exactly one acts, the other stands by (and says so
on /healthz) and takes over when the first dies. Instances under different
Leases may run side by side only for disjoint namespaces: one whose namespaces
overlap a live instance's refuses to start.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from collections.abc import Sequence

import pytest

from . import sharing
from .conftest import OperatorProcess, free_port, wait_ready
from .test_operator import apply_db, helm
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
LEASE_SECONDS = 6
LEASE_NAMESPACE = "mydb-system"  # where hack/install-dev.sh lets the suite's ServiceAccount write Leases
DATABASE = {"replicas": 1, "version": "15.2", "storage": "1Gi"}


def instance(operator: OperatorProcess, name: str, lease: str, args: Sequence[str] = ()) -> OperatorProcess:
    """Another `mydb-operator run` beside (or instead of) the suite's, with its own log and /healthz port."""
    return OperatorProcess(cluster=operator.cluster, kubeconfig=operator.kubeconfig,
                           log_path=operator.log_path.parent / f"operator-{name}.log", lease_name=lease,
                           lease_seconds=LEASE_SECONDS, health_port=free_port(), args=list(args), resync=4)


def healthz(process: OperatorProcess) -> str:
    """The status and body of its /healthz, e.g. "200 standby: Lease NS/NAME held by ID"."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{process.health_port}/healthz", timeout=5) as response:
            return f"{response.status} {response.read().decode().strip()}"
    except OSError as error:
        return f"unreachable: {error}"


def lease_holder(cluster, name: str) -> str:
    return (get_json(cluster, "-n", LEASE_NAMESPACE, "lease", name).get("spec") or {}).get("holderIdentity") or ""


def revisions(cluster, namespace: str, name: str) -> int:
    return len(json.loads(helm(cluster, "history", name, "-n", namespace, "-o", "json")))


def refused(process: OperatorProcess) -> str:
    """Start an instance that must refuse: wait for it to exit 2, return its log."""
    process.start(wait=False)
    wait_for("the instance to refuse and exit", lambda: process.process.poll() is not None, timeout=60)
    text = process.log_since_start()
    assert process.process.returncode == 2, text
    assert "refusing to start" in text and "Traceback" not in text, text
    return text


@pytest.mark.own_operator
@pytest.mark.long
def test_one_leader_and_a_bounded_takeover(cluster, operator, namespace):
    """Two instances of one Lease. While both run, only the leader acts: resyncs of an unchanged
    database add no Helm revision, a spec change adds exactly one, and the standby's /healthz
    names the leader. After a SIGKILL of the leader the standby leads within the lease time
    (+ its retry and a margin) and applies the next spec change. Both manage this namespace only: under
    xdist the worker's operator goes on beside them (sharing.py); alone, the suite's operator for all
    namespaces holds another Lease and must not act here."""
    lease = f"ha-{namespace[-5:]}"
    beside = sharing.beside_the_shared_operator(namespace)
    if not beside:
        operator.stop()
    first, second = instance(operator, "a", lease, ["-n", namespace]), instance(operator, "b", lease, ["-n", namespace])
    try:
        first.start(wait=False)
        wait_for("a leader", lambda: "became the leader" in first.log_since_start(), timeout=30)
        leader = lease_holder(cluster, lease)
        standing_by = f"standby: Lease {LEASE_NAMESPACE}/{lease} held by {leader}"
        second.start(wait=False)
        wait_for("b standing by", lambda: standing_by in second.log_since_start(), timeout=30)
        assert healthz(second) == f"200 {standing_by}"

        apply_db(cluster, namespace, "ha", DATABASE)
        wait_ready(cluster, namespace, "ha")
        assert f"{namespace}/ha: helm revision 1 applied" in first.log_since_start()
        assert revisions(cluster, namespace, "ha") == 1

        cluster.kubectl("scale", "-n", namespace, "mydb/ha", "--replicas=2")
        wait_for("the leader to apply the change",
                 lambda: f"{namespace}/ha: helm revision 2 applied" in first.log_since_start(), timeout=60)
        wait_ready(cluster, namespace, "ha")
        time.sleep(2.5 * first.resync)  # resyncs of both (if the standby acted) would show here
        assert revisions(cluster, namespace, "ha") == 2, "the change was applied more than once"
        text = second.log_since_start()
        assert "became the leader" not in text and "helm revision" not in text, text
        assert healthz(second) == f"200 {standing_by}"

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        wait_for("b leads", lambda: "became the leader" in second.log_since_start(), timeout=LEASE_SECONDS * 4)
        takeover = time.monotonic() - killed
        print(f"\ntakeover after SIGKILL: {takeover:.1f}s (lease {LEASE_SECONDS}s)")
        assert takeover <= LEASE_SECONDS + 2 * (LEASE_SECONDS / 3) + 3
        assert lease_holder(cluster, lease) not in ("", leader)

        cluster.kubectl("scale", "-n", namespace, "mydb/ha", "--replicas=3")
        wait_for("the new leader to apply the change",
                 lambda: f"{namespace}/ha: helm revision 3 applied" in second.log_since_start(), timeout=60)
        wait_ready(cluster, namespace, "ha")
        assert revisions(cluster, namespace, "ha") == 3
    finally:
        first.stop()
        second.stop()
        if not beside:
            operator.start()


def test_an_overlapping_instance_under_another_lease_refuses_to_start(cluster, operator, namespace):
    """The suite's operator leads for its namespaces (under xdist the worker's, `gw0-*`: sharing.py; alone,
    all of them). One more instance for this namespace under its own Lease exits 2 at once, naming that
    Lease, its holder and scope and how to resolve it, with no traceback and no Lease of its own; the suite's
    operator carries on."""
    holder = wait_for("the suite's operator to hold its Lease", lambda: lease_holder(cluster, operator.lease_name))
    lease = f"scoped-{namespace[-5:]}"
    text = refused(instance(operator, "overlapping", lease, args=["-n", namespace]))
    scope = f"namespace {sharing.PREFIX}*" if sharing.WORKER else "all namespaces"
    assert f"{holder}, holds the Lease {LEASE_NAMESPACE}/{operator.lease_name} " in text, text
    assert f"manages {scope}, which overlaps this instance's namespace {namespace};" in text, text
    assert f"--leader-lease-namespace {LEASE_NAMESPACE} --leader-lease-name {operator.lease_name}" in text, text
    assert get_json(cluster, "-n", LEASE_NAMESPACE, "lease", lease) == {}
    assert operator.process.poll() is None


@pytest.mark.long
@pytest.mark.own_operator
def test_instances_for_disjoint_namespaces_run_side_by_side(cluster, operator, namespace):
    """Two instances, each for its own namespace under its own Lease, both lead, and each brings its
    own database to Ready without touching the other's; a third one for all namespaces, under yet
    another Lease, overlaps both and refuses to start. Under xdist both namespaces are outside the
    worker's operator's scope (sharing.OWN_PREFIX); alone, the suite's operator for all namespaces
    overlaps both and is stopped meanwhile."""
    other = f"{namespace}-b"
    cluster.kubectl("create", "namespace", other)
    cluster.kubectl("label", "namespace", other, "mydb.test/e2e=true")
    suffix = namespace[-5:]
    left = instance(operator, "scope-left", f"left-{suffix}", args=["-n", namespace])
    right = instance(operator, "scope-right", f"right-{suffix}", args=["-n", other])
    beside = sharing.beside_the_shared_operator(namespace)
    if not beside:
        operator.stop()
    try:
        left.start()
        right.start()
        apply_db(cluster, namespace, "left", DATABASE)
        apply_db(cluster, other, "right", DATABASE)
        wait_ready(cluster, namespace, "left")
        wait_ready(cluster, other, "right")
        assert f"{namespace}/left: helm revision 1 applied" in left.log_since_start()
        assert f"{other}/right: helm revision 1 applied" in right.log_since_start()
        assert f"{other}/" not in left.log_since_start() and f"{namespace}/" not in right.log_since_start()

        text = refused(instance(operator, "scope-all", f"all-{suffix}"))
        assert "which overlaps this instance's all namespaces" in text, text
        named = re.search(rf"holds the Lease {LEASE_NAMESPACE}/(\S+) \(", text)
        assert named, text
        if not beside:  # alone, the two are the only live Leases (under xdist the first overlapping one by name)
            assert named.group(1) == f"left-{suffix}", text
        assert left.process.poll() is None and right.process.poll() is None
    finally:
        left.stop()
        right.stop()
        if beside:  # no operator manages the other namespace now: its database's finalizer would hold it
            cluster.kubectl("-n", other, "patch", "mydb/right", "--type=merge", "-p",
                            '{"metadata":{"finalizers":null}}', check=False)
        else:
            operator.start()
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
