"""status.phase: its values, and the one phase (with Ready's reason and message) the facts give. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .problem import Problem

PENDING, DEPLOYING, RUNNING, DEGRADED, FAILED, HIBERNATED, DELETING = (
    "Pending",
    "Deploying",
    "Running",
    "Degraded",
    "Failed",
    "Hibernated",
    "Deleting",
)


@dataclass(frozen=True)
class Assessment:
    phase: str
    ready: bool
    reason: str  # of the Ready condition
    message: str


def rolled_out(statefulset: dict[str, Any] | None, desired: int) -> bool:
    """The StatefulSet controller has seen the latest spec and every replica runs its latest revision.

    Under OnDelete (the operator restarts the pods) the controller never moves currentRevision on:
    updatedReplicas alone says it."""
    if not statefulset:
        return False
    sts_status = statefulset.get("status") or {}
    on_delete = ((statefulset.get("spec") or {}).get("updateStrategy") or {}).get("type") == "OnDelete"
    return bool(
        sts_status.get("observedGeneration", 0) >= statefulset["metadata"].get("generation", 0)
        and sts_status.get("updatedReplicas", 0) >= desired
        and (on_delete or sts_status.get("currentRevision") == sts_status.get("updateRevision"))
    )


def assess(
    *,
    problem: Problem | None,
    hibernating: bool,
    installed: bool,
    pods: int,
    ready_pods: int,
    desired: int,
    rolled_out: bool,
    failures: list[str],
    primary: tuple[str, str] = ("Serving", ""),
    routing: str | None = None,
    upgrading: str | None = None,
    disk_full: str | None = None,
    behind: str | None = None,
) -> Assessment:
    """The first that holds: a problem, hibernation, not installed, the primary down or moving, all ready
    and routed, failing pods, rolling out.

    primary: where the primary's plan stands (policy/primary.py) and why; routing: what a Service does not
    route to yet (status/primary.py), None when both route where they should; upgrading: what a major
    upgrade that stopped the pods does (policy/major_upgrade.py); disk_full: which data volumes are full
    (policy/volumes.py); behind: which replicas a failover could not promote, and why (status/primary.py)."""
    if problem:
        return Assessment(FAILED, False, problem.reason, problem.message)
    if hibernating:
        message = "hibernated: no pods run, the data is kept" if not pods else "hibernating: stopping the pods"
        return Assessment(HIBERNATED, False, "Hibernated", message)
    if not installed:
        return Assessment(PENDING, False, "Pending", "the release is not installed yet")
    if upgrading is not None:
        return Assessment(DEPLOYING, False, "MajorUpgrade", upgrading)
    if disk_full is not None:  # first: a primary down for want of space is told by its cause
        return Assessment(DEGRADED, False, "DiskFull", disk_full)
    state, why = primary
    if state in PRIMARY_DOWN:
        return Assessment(DEGRADED, False, state, why)
    if state == "SwitchingOver":
        return Assessment(DEPLOYING, False, state, why)
    if ready_pods == desired and pods == desired and rolled_out:
        if routing is None and behind is not None:  # it serves, but a failover now would lose data or wait
            return Assessment(DEGRADED, True, "ReplicasBehind", behind)
        if routing is None:
            return Assessment(RUNNING, True, "AllReplicasReady", f"{desired}/{desired} replicas are ready")
        return Assessment(DEPLOYING, False, "RoutingPending", routing)
    if failures:
        return Assessment(DEGRADED, False, "PodsFailing", "; ".join(failures))
    return Assessment(DEPLOYING, False, "RollingOut", f"{ready_pods}/{desired} replicas are ready")


# Where the primary's plan stands when it does not serve (policy/primary.py's states).
PRIMARY_DOWN = frozenset({"WaitingFailoverDelay", "FailingOver", "NoEligibleReplica"})
