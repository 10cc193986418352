"""A major upgrade in place, one step a pass, its state in status.upgrade. Pure.

Raising spec.version to a later major runs pg_upgrade --link on the primary's
volume (scripts/major-upgrade.sh, in a Job: desired/upgrade_job.py), as
CloudNativePG 1.26 does. The phases:

  Waiting    until every pod is ready and every replica has replayed all of
             the primary's WAL (its copy is cloned again afterwards)
  Stopping   every pod stops (0 replicas at the old version): the primary
             shuts down cleanly
  Upgrading  the Job runs; nothing else starts meanwhile
  Starting   the new major's pods: the primary on its upgraded data, the
             replicas cloned from it (entrypoint.sh); then ANALYZE
  Succeeded  done
  Failed     the check or pg_upgrade refused, or the Job failed: the data is
             untouched and the pods run the old major again; the retry
             annotation tries once more

Each phase's facts are in the observation or the status, so an operator
restarted in the middle goes on where it stood."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .. import names
from ..model.instances import InstanceFacts, Probe
from ..model.spec import DatabaseSpec
from ..model.versions import major

WAITING, STOPPING, UPGRADING, STARTING, SUCCEEDED, FAILED = (
    "Waiting",
    "Stopping",
    "Upgrading",
    "Starting",
    "Succeeded",
    "Failed",
)
UNDER_WAY = (STOPPING, UPGRADING)  # the pods are down: a change of spec waits for the outcome

Object = dict[str, Any]
Event = tuple[str, str, str]


@dataclass(frozen=True)
class UpgradeState:
    """status.upgrade."""

    from_version: str
    to_version: str
    phase: str
    started_at: str = ""
    primary: str = ""  # the pod whose volume is upgraded
    job: str = ""
    message: str = ""
    finished_at: str = ""
    retry: str = ""  # the retry annotation's value this attempt answered

    def as_status(self) -> dict[str, str]:
        return {STATUS_KEYS[key]: value for key, value in asdict(self).items() if value}


STATUS_KEYS = {
    "from_version": "fromVersion",
    "to_version": "toVersion",
    "phase": "phase",
    "started_at": "startedAt",
    "primary": "primary",
    "job": "job",
    "message": "message",
    "finished_at": "finishedAt",
    "retry": "retry",
}


def known_state(status: dict[str, Any] | None) -> UpgradeState | None:
    entry = (status or {}).get("upgrade") or {}
    fields = {STATUS_KEYS[key]: key for key in STATUS_KEYS}
    try:
        return UpgradeState(**{fields[key]: str(value) for key, value in entry.items() if key in fields})
    except TypeError:  # none, or one written by hand without the required fields
        return None


@dataclass(frozen=True)
class UpgradeStep:
    """What one pass does for the upgrade."""

    state: UpgradeState | None  # status.upgrade after this pass
    hold: tuple[str, int] | None = None  # (version, replicas) Helm applies instead of the spec's
    start_job: bool = False
    analyze: bool = False
    event: Event | None = None


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


def upgraded_now(previous: dict[str, Any], state: UpgradeState | None) -> bool:
    """This pass ended an upgrade with success (the last one had not)."""
    known = known_state(previous)
    return state is not None and state.phase == SUCCEEDED and (known is None or known.phase != SUCCEEDED)


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


def next_step(spec: DatabaseSpec, known: UpgradeState | None, facts: Facts) -> UpgradeStep:
    """The upgrade's next step: start it, go on with it, or nothing to do."""
    if known is not None and known.phase in UNDER_WAY:
        return under_way(spec, known, facts)
    if known is not None and known.phase == STARTING:
        return starting(known, facts)
    running = facts.running
    asked = running is not None and spec.major > major(running)
    if known is not None and known.phase == FAILED and asked and facts.retry in ("", known.retry):
        return UpgradeStep(known, hold=(known.from_version, spec.replicas))  # until the retry annotation
    if not asked or running is None:
        return UpgradeStep(known)
    why = not_ready(spec, facts)
    if why is not None:
        waiting = UpgradeState(running, spec.version, WAITING, message=why, retry=facts.retry)
        return UpgradeStep(waiting, hold=(running, spec.replicas))
    message = f"stopping every pod to upgrade {facts.primary}'s data from PostgreSQL {running} to {spec.version}"
    stopping = UpgradeState(
        running, spec.version, STOPPING, facts.now, facts.primary, message=message, retry=facts.retry
    )
    return UpgradeStep(stopping, hold=(running, 0), event=("Normal", "MajorUpgradeStarted", message))


def under_way(spec: DatabaseSpec, known: UpgradeState, facts: Facts) -> UpgradeStep:
    """Stopping, then the Job: the pods stay down at the old version until it has an outcome."""
    down = (known.from_version, 0)
    if known.phase == STOPPING:
        if facts.pods:
            return UpgradeStep(known, hold=down)
        job = names.major_upgrade_job(facts.release, known.started_at)
        upgrading = replace(known, phase=UPGRADING, message=upgrading_message(known), job=job)
        return UpgradeStep(upgrading, hold=down, start_job=True)
    outcome = job_outcome(facts.job)
    if outcome is None:  # the Job runs (the message again: a failed start may have told why it waited), or is made
        running = replace(known, message=upgrading_message(known)) if facts.job is not None else known
        return UpgradeStep(running, hold=down, start_job=facts.job is None)
    if outcome == FAILED:
        why = facts.job_failure or f"the Job {known.job} failed"
        failed = replace(known, phase=FAILED, message=why, finished_at=facts.now)
        return UpgradeStep(
            failed,
            hold=(known.from_version, spec.replicas),
            event=("Warning", "MajorUpgradeFailed", f"PostgreSQL {known.from_version} to {known.to_version}: {why}"),
        )
    message = f"starting PostgreSQL {known.to_version} on the upgraded data; the replicas are cloned from it"
    return UpgradeStep(replace(known, phase=STARTING, message=message))


def upgrading_message(known: UpgradeState) -> str:
    return f"pg_upgrade of {known.primary}'s data from PostgreSQL {known.from_version} to {known.to_version}"


def starting(known: UpgradeState, facts: Facts) -> UpgradeStep:
    """The new major's primary serves: ANALYZE (pg_upgrade keeps no statistics), then done."""
    primary = facts.probes.get(known.primary)
    if not isinstance(primary, InstanceFacts) or primary.in_recovery or not primary.version:
        return UpgradeStep(known)
    if major(primary.version) != major(known.to_version):
        return UpgradeStep(known)
    message = f"upgraded from PostgreSQL {known.from_version} to {primary.version}; statistics gathered (ANALYZE)"
    done = replace(known, phase=SUCCEEDED, message=message, finished_at=facts.now)
    return UpgradeStep(done, analyze=True, event=("Normal", "MajorUpgradeSucceeded", message))
