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
    """The StatefulSet controller has seen the latest spec and every replica runs its latest revision."""
    if not statefulset:
        return False
    sts_status = statefulset.get("status") or {}
    return bool(
        sts_status.get("observedGeneration", 0) >= statefulset["metadata"].get("generation", 0)
        and sts_status.get("updatedReplicas", 0) >= desired
        and sts_status.get("currentRevision") == sts_status.get("updateRevision")
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
) -> Assessment:
    """The first that holds: a problem, hibernation, not installed, all ready, failing pods, rolling out."""
    if problem:
        return Assessment(FAILED, False, problem.reason, problem.message)
    if hibernating:
        message = "hibernated: no pods run, the data is kept" if not pods else "hibernating: stopping the pods"
        return Assessment(HIBERNATED, False, "Hibernated", message)
    if not installed:
        return Assessment(PENDING, False, "Pending", "the release is not installed yet")
    if ready_pods == desired and pods == desired and rolled_out:
        return Assessment(RUNNING, True, "AllReplicasReady", f"{desired}/{desired} replicas are ready")
    if failures:
        return Assessment(DEGRADED, False, "PodsFailing", "; ".join(failures))
    return Assessment(DEPLOYING, False, "RollingOut", f"{ready_pods}/{desired} replicas are ready")
