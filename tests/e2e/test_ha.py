"""Two operator replicas with leader election: exactly one reconciles, the other takes over when it dies."""

from __future__ import annotations

import signal
import time

import pytest

from .conftest import OperatorProcess, wait_ready
from .test_operator import apply_db
from .waiting import wait_for

pytestmark = pytest.mark.e2e
LEASE_SECONDS = 6


def replica(cluster, operator, name: str, lease: str) -> OperatorProcess:
    return OperatorProcess(
        cluster=cluster, kubeconfig=operator.kubeconfig, log_path=operator.log_path.parent / f"operator-{name}.log",
        args=["--leader-elect", "--leader-lease-name", lease, "--leader-lease-namespace", "mydb-system",
              "--leader-lease-seconds", str(LEASE_SECONDS)],
    )


def test_one_leader_and_a_bounded_takeover(cluster, operator, namespace):
    """With both alive only the leader runs Helm; after SIGKILL the standby leads within the lease time."""
    lease = f"ha-{namespace[-5:]}"
    operator.stop()  # the suite's own operator has no election; it must not act here
    first, second = replica(cluster, operator, "a", lease), replica(cluster, operator, "b", lease)
    try:
        first.start(wait=False)
        wait_for("a leader", lambda: "became the leader" in first.log_since_start(), timeout=30)
        second.start(wait=False)
        wait_for("b waiting", lambda: "waiting to lead" in second.log_since_start(), timeout=30)

        apply_db(cluster, namespace, "ha", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "ha")
        assert f"{namespace}/ha: helm revision 1 applied" in first.log_since_start()
        assert "became the leader" not in second.log_since_start()
        assert "helm revision" not in second.log_since_start()

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        wait_for("b leads", lambda: "became the leader" in second.log_since_start(), timeout=LEASE_SECONDS * 4)
        takeover = time.monotonic() - killed
        print(f"\ntakeover after SIGKILL: {takeover:.1f}s (lease {LEASE_SECONDS}s)")
        assert takeover <= LEASE_SECONDS + 2 * (LEASE_SECONDS / 3) + 3

        cluster.kubectl("scale", "-n", namespace, "mydb/ha", "--replicas=2")
        wait_for("the new leader scaled it", lambda: f"{namespace}/ha: helm revision 2 applied"
                 in second.log_since_start(), timeout=60)
        wait_ready(cluster, namespace, "ha")
    finally:
        first.stop()
        second.stop()
        operator.start()
