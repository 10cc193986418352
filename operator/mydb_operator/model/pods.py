"""Facts read from an observed pod: its ordinal, readiness and failure. Pure."""

from __future__ import annotations

import re
from typing import Any

from .. import names

Object = dict[str, Any]
# Container states that will not fix themselves: the pod is failing, not starting. Each kind is told in
# words that stay the same while the kubelet retries (Error, then CrashLoopBackOff, then Error...), so one
# failure gives one Warning, not one per back-off.
CRASHES = frozenset({"CrashLoopBackOff", "Error"})
PULLS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
POD_FAILURE_REASONS = CRASHES | PULLS | {"CreateContainerConfigError"}


def pod_ordinal(pod: Object) -> int:
    return names.pod_ordinal(pod["metadata"]["name"])


def role_label(pod: Object) -> str | None:
    """The role the operator labelled the pod with (primary, replica, fenced), if any."""
    role: str | None = (pod["metadata"].get("labels") or {}).get(names.ROLE_LABEL)
    return role


TLS_VOLUME = "tls"  # the chart's database pods mount their certificate under this volume name


def tls_secret(pod_spec: Object | None) -> str:
    """The Secret a pod (or a StatefulSet's template) with this spec takes its certificate from; "": it
    mounts none, so it serves plain TCP."""
    for volume in (pod_spec or {}).get("volumes") or []:
        if volume.get("name") == TLS_VOLUME:
            return str((volume.get("secret") or {}).get("secretName") or "")
    return ""


def serves_tls(pod_spec: Object | None) -> bool:
    return bool(tls_secret(pod_spec))


def is_ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_failure(pod: Object) -> str | None:
    """Why the pod cannot run, in words that hold while nothing changes; None while it runs or starts."""
    status = pod.get("status") or {}
    name = pod["metadata"]["name"]
    if status.get("phase") == "Failed":
        return f"{name} failed: {status.get('message') or status.get('reason') or 'Failed'}"
    unschedulable = unscheduled_because(pod)
    if unschedulable is not None:
        return f"{name} cannot be scheduled: {unschedulable}"
    # The first boot (initdb, a restore, a replica's clone) runs in an init container.
    for container in status.get("initContainerStatuses") or []:
        if (why := _failing(container)) is not None:
            return f"{name}: init container {why}"
    for container in status.get("containerStatuses") or []:
        if (why := _failing(container)) is not None:
            return f"{name}: {why}"
    return None


# The scheduler's words for a claim on its way: still being bound (the provisioner's to finish), or not yet in
# its cache (the StatefulSet controller makes the claim just before the pod, and recreates a missing one).
CLAIM_ON_ITS_WAY = re.compile(r'unbound immediate PersistentVolumeClaims|persistentvolumeclaim "[^"]+" not found')


def unscheduled_because(pod: Object) -> str | None:
    """The scheduler's reasons no node takes the pod (resources no node has, a selector nothing matches), or
    None. A claim on its way is no failure."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            message: str = condition.get("message") or ""
            if condition.get("status") != "False" or CLAIM_ON_ITS_WAY.search(message):
                return None
            return scheduler_reasons(message) or "no node can take it"
    return None


def scheduler_reasons(message: str) -> str:
    """The reasons of a scheduler's message without the node counts, which change as nodes come and go:
    "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.
    preemption: ..." is "Insufficient cpu; node(s) didn't match Pod's node affinity/selector"."""
    _, colon, rest = message.partition("nodes are available: ")
    first = (rest if colon else message).split(". ", 1)[0].split("preemption:", 1)[0].strip().rstrip(".")
    reasons = [re.sub(r"^\d+ ", "", part.strip()) for part in first.split(", ") if part.strip()]
    return "; ".join(reasons)[:400]


def _failing(container: Object) -> str | None:
    state = container.get("state") or {}
    waiting = state.get("waiting") or {}
    reason = waiting.get("reason") or (state.get("terminated") or {}).get("reason")
    name = container.get("name")
    if reason in CRASHES or _between_crashes(container):
        return f"{name} keeps failing{_said(container)}"
    if reason in PULLS:
        return f"{name} cannot pull its image {container.get('image')}"
    if reason in POD_FAILURE_REASONS:
        return f"{name} cannot start: {waiting.get('message') or reason}"
    return None


# Lines that say why a container failed, the most telling first: PostgreSQL's own, the chart's scripts'
# refusals, then any line that says something failed.
WHY_MARKERS = (("FATAL:", "PANIC:"), ("refusing", "is before", "is after", "recover:"), ("failed", "cannot", "not "))


def last_words(message: str) -> str:
    """The line of a failed container's log tail (its termination message) that says why: the last one that
    reads like a reason, else the last line; at most 400 characters. PostgreSQL's FATAL line about a
    configuration file that "contains errors" gets the errors it logged just before (the parameter, the value)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    telling = (
        index
        for markers in WHY_MARKERS
        for index in reversed(range(len(lines)))
        if any(m in lines[index] for m in markers)
    )
    at = next(telling, len(lines) - 1)
    why = _without_prefix(lines[at])
    if why.startswith("FATAL:") and "contains errors" in why:
        errors = [_without_prefix(line) for line in lines[:at] if "LOG:" in line and "parameter" in line]
        why = ": ".join([why, *(error.removeprefix("LOG:").strip() for error in errors)])
    return why[:400]


def _without_prefix(line: str) -> str:
    """A log line from its level on, without its time and pid: the same failure, the same words."""
    for level in ("FATAL:", "PANIC:", "LOG:"):
        if level in line:
            return line[line.index(level) :]
    return line


def failed_words(pod: Object) -> str:
    """What the pod's first container that exited non-zero said last ("name: why"), or "": a Job's reason."""
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        ended = (container.get("state") or {}).get("terminated") or {}
        if ended.get("exitCode") and (words := last_words(ended.get("message") or "")):
            name = container.get("name")
            return words if words.startswith(f"{name}:") else f"{name}: {words}"
    return ""


def _between_crashes(container: Object) -> bool:
    """Restarted after a crash and not ready yet: the kubelet's next try, still failing until it is ready.
    Without this, the second or so a crashing server runs between back-offs reads as a rollout, and the
    next crash as a new failure with a second Warning (seen in CI)."""
    crashed = ((container.get("lastState") or {}).get("terminated") or {}).get("exitCode")
    running = "running" in (container.get("state") or {})
    return bool(crashed) and running and not container.get("ready")


def _said(container: Object) -> str:
    """': <why>' from the container's last termination message (kept by FallbackToLogsOnError), or ''."""
    for state in (container.get("state") or {}, container.get("lastState") or {}):
        message = (state.get("terminated") or {}).get("message")
        if message and (words := last_words(message)):
            return f": {words}"
    return ""


NO_SPACE = "No space left on device"


def stopped_for_space(pod: Object) -> bool:
    """Its server is down, and its last words were that its volume is full (the chart's containers end with
    their last log lines as termination message): the kubelet has no figures for a pod that does not run."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") != names.POSTGRES_CONTAINER or "running" in (container.get("state") or {}):
            continue
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            if NO_SPACE in ((state.get("terminated") or {}).get("message") or ""):
                return True
    return False
