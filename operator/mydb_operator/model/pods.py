"""Facts read from an observed pod: its ordinal, readiness and failure. Pure."""

from __future__ import annotations

from typing import Any

from .. import names

Object = dict[str, Any]
# Container states that will not fix themselves: the pod is failing, not starting.
POD_FAILURE_REASONS = {
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "InvalidImageName",
    "Error",
}


def pod_ordinal(pod: Object) -> int:
    return names.pod_ordinal(pod["metadata"]["name"])


def is_ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_failure(pod: Object) -> str | None:
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
