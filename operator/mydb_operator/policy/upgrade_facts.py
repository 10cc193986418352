"""What a major upgrade's step reads (Facts), and the readings of it the steps share. Pure.

policy/major_upgrade.py takes the steps; reconcile/upgrading.py gathers these facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.instances import InstanceFacts, Probe
from ..model.spec import DatabaseSpec

SUCCEEDED, FAILED = "Succeeded", "Failed"  # a Job's outcome, in the upgrade's words
# The room major-upgrade.sh wants beside the data (the Job's MIN_FREE_MB): the new cluster's catalogs and
# pg_upgrade's files; --link shares the data files themselves.
MIN_FREE_MB = 256
MI = 2**20

Object = dict[str, Any]


@dataclass(frozen=True)
class Facts:
    """What the step reads besides the spec and the last state."""

    running: str | None  # the version the StatefulSet runs (its image's tag)
    primary: str  # the recorded primary pod
    pods: tuple[Object, ...]  # the database's pods
    probes: dict[str, Probe]
    job: Object | None  # the upgrade Job named in the state, if it exists
    job_failure: str  # why the Job failed (its pod's last words), when it did
    retry: str  # the retry annotation's value ("" when absent)
    now: str
    release: str = ""
    unrunnable: str = ""  # why the platform cannot run spec.version (desired/platform.py), "" when it can
    free_mb: int | None = None  # room on the primary's data volume as last measured (None: unknown)


def measured_free_mb(storage: Mapping[str, Any] | None, pod: str) -> int | None:
    """POD's data volume's free room in MB as status.storage last had it (reconcile/volumes.py), or None."""
    for volume in (storage or {}).get("volumes") or []:
        used, capacity = volume.get("usedBytes"), volume.get("capacityBytes")
        if volume.get("pod") == pod and isinstance(used, int) and isinstance(capacity, int) and capacity:
            return max(capacity - used, 0) // MI
    return None


def not_ready(spec: DatabaseSpec, facts: Facts) -> str | None:
    """Why the upgrade cannot stop the database yet, or None."""
    ready = [p for p in facts.pods if _ready(p)]
    if spec.hibernate or len(ready) < spec.replicas:
        return f"waiting for every pod to be ready ({len(ready)}/{0 if spec.hibernate else spec.replicas})"
    primary = facts.probes.get(facts.primary)
    if not isinstance(primary, InstanceFacts) or primary.in_recovery:
        return f"waiting for the primary {facts.primary} to answer"
    for pod in sorted(p["metadata"]["name"] for p in ready if p["metadata"]["name"] != facts.primary):
        replica = facts.probes.get(pod)
        if not isinstance(replica, InstanceFacts) or (replica.replay_lsn or 0) < primary.wal_lsn:
            return f"waiting for the replica {pod} to replay all of the primary's WAL"
    return None


def _ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def job_outcome(job: Object | None) -> str | None:
    """Succeeded, Failed, or None while it runs (or does not exist)."""
    status = (job or {}).get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Complete", "SuccessCriteriaMet") and condition.get("status") == "True":
            return SUCCEEDED
        if condition.get("type") in ("Failed", "FailureTarget") and condition.get("status") == "True":
            return FAILED
    return SUCCEEDED if status.get("succeeded") else None


def job_active(job: Object | None) -> bool:
    """Its pod still runs or stops (a Job marked FailureTarget before its pod ended): the volume is not free."""
    status = (job or {}).get("status") or {}
    return bool(status.get("active") or status.get("terminating"))


def too_little_room(facts: Facts) -> str:
    """Why the primary's volume cannot hold the new cluster, as last measured ("" when it can, or unknown).
    No figure in the words: they would change, and with them the Warning, at every write."""
    if facts.free_mb is None or facts.free_mb >= MIN_FREE_MB:
        return ""
    return f"{facts.primary}'s volume has less than {MIN_FREE_MB} MB free beside the data: grow spec.storage first"
