"""The MyDatabase status as a pure function of the spec, the release and what was observed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from . import api, backups, lifecycle
from .model import DatabaseSpec
from .observe import Observation

PENDING, DEPLOYING, RUNNING, DEGRADED, FAILED, HIBERNATED, DELETING = (
    "Pending", "Deploying", "Running", "Degraded", "Failed", "Hibernated", "Deleting",
)
POD_FAILURE_REASONS = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                       "InvalidImageName", "Error"}


@dataclass(frozen=True)
class Problem:
    """Why the operator could not do its job: a CamelCase reason and a sentence."""
    reason: str
    message: str


def pod_ordinal(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def role_of(pod: dict[str, Any]) -> str:
    """Ordinal 0 is the primary (it initialises the data); the others stream from it."""
    return api.PRIMARY if pod_ordinal(pod) == 0 else api.REPLICA


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_failure(pod: dict[str, Any]) -> str | None:
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return f"{pod['metadata']['name']} failed: {status.get('message') or status.get('reason') or 'Failed'}"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        reason = waiting.get("reason") or terminated.get("reason")
        if reason in POD_FAILURE_REASONS:
            return f"{pod['metadata']['name']}: {reason}"
    return None


def condition(previous: Iterable[dict], type_: str, status: bool, reason: str, message: str,
              now: str, generation: int) -> dict[str, Any]:
    """A condition that keeps its lastTransitionTime while its status does not change."""
    value = "True" if status else "False"
    old = next((c for c in previous if c.get("type") == type_), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value and old.get("lastTransitionTime") else now
    return {"type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


def endpoints(release: str, namespace: str, port: int = 5432) -> dict[str, str]:
    return {
        "primary": f"{release}.{namespace}.svc:{port}",
        "replicas": f"{release}-ro.{namespace}.svc:{port}",
    }


def build_status(
    *,
    release: str,
    namespace: str,
    generation: int,
    spec: DatabaseSpec | None,
    observation: Observation,
    applied: dict[str, Any] | None,
    problem: Problem | None,
    previous: dict[str, Any],
    now: str,
    operation: dict[str, Any] | None = None,
    storage_blocked: str | None = None,
    on_demand: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Everything under .status, from facts only; equal inputs give an equal dict (no needless writes)."""
    old_conditions = previous.get("conditions") or []
    pods = sorted((p for p in observation.pods if not p["metadata"].get("deletionTimestamp")), key=pod_ordinal)
    ready_pods = [p for p in pods if is_ready(p)]
    desired = 0 if spec is None or spec.hibernate else spec.replicas
    sts_status = (observation.statefulset or {}).get("status") or {}
    failures = [f for f in (pod_failure(p) for p in pods) if f]
    rolled_out = bool(observation.statefulset) and (
        sts_status.get("observedGeneration", 0) >= observation.statefulset["metadata"].get("generation", 0)
        and sts_status.get("updatedReplicas", 0) >= desired
        and sts_status.get("currentRevision") == sts_status.get("updateRevision")
    )
    all_ready = len(ready_pods) == desired and len(pods) == desired and rolled_out

    if problem:
        phase, ready, reason, message = FAILED, False, problem.reason, problem.message
    elif spec is not None and spec.hibernate:
        done = not pods
        phase, ready = HIBERNATED, False
        reason = "Hibernated"
        message = "hibernated: no pods run, the data is kept" if done else "hibernating: stopping the pods"
    elif applied is None:
        phase, ready, reason, message = PENDING, False, "Pending", "the release is not installed yet"
    elif all_ready:
        phase, ready, reason, message = RUNNING, True, "AllReplicasReady", f"{desired}/{desired} replicas are ready"
    elif failures:
        phase, ready, reason, message = DEGRADED, False, "PodsFailing", "; ".join(failures)
    else:
        phase, ready = DEPLOYING, False
        reason, message = "RollingOut", f"{len(ready_pods)}/{desired} replicas are ready"

    progressing = phase in (DEPLOYING, PENDING) or (phase == HIBERNATED and bool(pods))
    conditions = [
        condition(old_conditions, "Ready", ready, reason, message, now, generation),
        condition(old_conditions, "Progressing", progressing, reason if progressing else "Stable",
                  message if progressing else "nothing is changing", now, generation),
        condition(old_conditions, "Degraded", phase in (DEGRADED, FAILED), reason if phase in (DEGRADED, FAILED)
                  else "Healthy", message if phase in (DEGRADED, FAILED) else "no failures", now, generation),
    ]
    conditions.append(resizing_condition(spec, observation, storage_blocked, old_conditions, now, generation))
    status: dict[str, Any] = {
        "ready": ready,
        "phase": phase,
        "message": message,
        "readyReplicas": len(ready_pods),
        "replicas": len(pods),
        "selector": api.label_selector(api.selector_labels(release)),
        "observedGeneration": generation,
        "conditions": conditions,
        "endpoints": endpoints(release, namespace),
    }
    running = lifecycle.running_version(observation.statefulset)
    if running:
        status["version"] = running
    restarting = lifecycle.pending_restart(observation.statefulset, pods)
    status["pendingRestart"] = bool(restarting)
    if operation:
        settled = phase == RUNNING or (phase == HIBERNATED and not pods)
        status["lastOperation"] = finish_operation(operation, settled, problem, now)
    primary = next((p for p in pods if role_of(p) == api.PRIMARY), None)
    if primary is not None:
        status["primary"] = primary["metadata"]["name"]
    if applied:
        status["release"] = applied
    backup = {**backups.facts(observation.cronjob, observation.jobs), **(on_demand or {})}
    if backup:
        status["backup"] = backup
    if spec is not None and spec.backup:
        healthy, why, said = backups.health(backup)
        conditions.append(condition(old_conditions, "BackupHealthy", healthy, why, said, now, generation))
    return status


def resizing_condition(spec: DatabaseSpec | None, observation: Observation, blocked: str | None,
                       previous: Iterable[dict], now: str, generation: int) -> dict[str, Any]:
    """True while some data claim has not reached spec.storage (the driver is still expanding it)."""
    if blocked:
        return condition(previous, "Resizing", False, "ExpansionNotSupported", blocked, now, generation)
    short = lifecycle.claims_short_of(observation.claims, spec.storage) if spec and observation.claims else []
    if short:
        done = len(observation.claims) - len(short)
        return condition(previous, "Resizing", True, "ExpandingVolumes",
                         f"{done}/{len(observation.claims)} claims at {spec.storage}; waiting for {', '.join(short)}",
                         now, generation)
    return condition(previous, "Resizing", False, "AtRequestedSize", "every claim has its requested size",
                     now, generation)


def finish_operation(operation: dict[str, Any], settled: bool, problem: Problem | None, now: str) -> dict[str, Any]:
    """An operation in progress ends when the database settles (Running, or Hibernated with no pods) or fails."""
    if operation.get("result") != "InProgress":
        return operation
    if problem is not None:
        return {**operation, "result": "Failed", "finishedAt": now}
    if settled:
        return {**operation, "result": "Succeeded", "finishedAt": now}
    return operation
