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


def role_label(pod: Object) -> str | None:
    """The role the operator labelled the pod with (primary, replica, fenced), if any."""
    role: str | None = (pod["metadata"].get("labels") or {}).get(names.ROLE_LABEL)
    return role


def is_ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_failure(pod: Object) -> str | None:
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return f"{pod['metadata']['name']} failed: {status.get('message') or status.get('reason') or 'Failed'}"
    name = pod["metadata"]["name"]
    # The first boot (initdb, a restore, a replica's clone) runs in an init container.
    for container in status.get("initContainerStatuses") or []:
        if (reason := _failing(container)) is not None:
            return f"{name}: {reason} in init container {container.get('name')}{_said(container)}"
    for container in status.get("containerStatuses") or []:
        if (reason := _failing(container)) is not None:
            return f"{name}: {reason}{_said(container)}"
    return None


def _failing(container: Object) -> str | None:
    state = container.get("state") or {}
    reason = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason")
    return reason if reason in POD_FAILURE_REASONS else None


# Lines that say why a container failed, the most telling first: PostgreSQL's own, the chart's scripts'
# refusals, then any line that says something failed.
WHY_MARKERS = (("FATAL:", "PANIC:"), ("refusing", "is before", "is after", "recover:"), ("failed", "cannot", "not "))


def last_words(message: str) -> str:
    """The line of a failed container's log tail (its termination message) that says why: the last one that
    reads like a reason, else the last line; at most 400 characters."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    telling = (line for markers in WHY_MARKERS for line in reversed(lines) if any(m in line for m in markers))
    why = next(telling, lines[-1])
    for level in ("FATAL:", "PANIC:"):  # without the log line's time and pid: the same failure, the same words
        if level in why:
            why = why[why.index(level) :]
    return why[:400]


def _said(container: Object) -> str:
    """': <why>' from the container's last termination message (kept by FallbackToLogsOnError), or ''."""
    for state in (container.get("state") or {}, container.get("lastState") or {}):
        message = (state.get("terminated") or {}).get("message")
        if message and (words := last_words(message)):
            return f": {words}"
    return ""
