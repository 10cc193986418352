"""A major upgrade in place, one step a pass, its state in status.upgrade. Pure.

Raising spec.version to a later major runs pg_upgrade --link on the primary's
volume (scripts/major-upgrade.sh, in a Job: desired/upgrade_job.py), as
CloudNativePG 1.26 does. The phases:

  Waiting    until every pod is ready and every replica has replayed all of
             the primary's WAL (its copy is cloned again afterwards)
  Refused    what can be known before a pod stops says no (no image for the
             major, too little room, a Job that cannot be built): the old major
             serves on, and every pass looks again
  Stopping   every pod stops (0 replicas at the old version): the primary
             shuts down cleanly
  Upgrading  the Job runs; nothing else starts meanwhile
  Starting   the new major's pods: the primary on its upgraded data, the
             replicas cloned from it (entrypoint.sh); then ANALYZE
  Succeeded  done
  Failed     the check or pg_upgrade refused, the Job failed or could not be
             made: the pods run the old major again; the retry annotation or
             another spec.version tries once more

A newer spec.version wins: until the Job is made (Waiting, Refused, Stopping)
the attempt is dropped and the spec starts over (the old major back up, or the
new target's own checks). A Job that was made may be half way through
pg_upgrade --link, which cannot be stopped safely: its outcome comes first,
and the spec is obeyed right after it.

Each phase's facts are in the observation or the status, so an operator
restarted in the middle goes on where it stood."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .. import names
from ..model.instances import InstanceFacts
from ..model.spec import DatabaseSpec
from ..model.versions import major
from .upgrade_facts import FAILED as FAILED  # re-exported: every phase is named here
from .upgrade_facts import SUCCEEDED as SUCCEEDED
from .upgrade_facts import Facts, job_active, job_outcome, not_ready, too_little_room

WAITING, REFUSED, STOPPING, UPGRADING, STARTING = "Waiting", "Refused", "Stopping", "Upgrading", "Starting"
UNDER_WAY = (STOPPING, UPGRADING)  # the pods are down for it
NOT_STARTED = (WAITING, REFUSED)  # no pod stopped for it yet
STARTED = "MajorUpgradeStarted"

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
    check_job: bool = False  # every pod is about to stop: build the Job first, refuse_stop() if it cannot be
    analyze: bool = False
    events: tuple[Event, ...] = ()


def upgraded_now(previous: dict[str, Any], state: UpgradeState | None) -> bool:
    """This pass ended an upgrade with success (the last one had not)."""
    known = known_state(previous)
    return state is not None and state.phase == SUCCEEDED and (known is None or known.phase != SUCCEEDED)


def next_step(spec: DatabaseSpec, known: UpgradeState | None, facts: Facts) -> UpgradeStep:
    """The upgrade's next step: start it, go on with it, drop it for a newer spec, or nothing to do."""
    if known is not None and known.phase == UPGRADING:
        return upgrading(spec, known, facts)
    if known is not None and known.phase == STARTING:
        return starting(spec, known, facts)
    if known is not None and known.phase == STOPPING:
        return stopping(known, facts) if spec.version == known.to_version else abandoned(spec, known, facts)
    return request(spec, known, facts)


def request(spec: DatabaseSpec, known: UpgradeState | None, facts: Facts) -> UpgradeStep:
    """While the old major's pods run: nothing asked, a failed attempt held, a refusal, a wait, or the stop."""
    before = known is not None and known.phase in (*NOT_STARTED, FAILED)
    running = facts.running or (known.from_version if known is not None and before else None)
    if running is None or spec.major <= major(running):
        # Not (or no longer) asked: an attempt that stopped nothing is dropped, an ended one stays told.
        return UpgradeStep(None if known is not None and known.phase in NOT_STARTED else known)
    held = known is not None and known.phase == FAILED and spec.version == known.to_version
    if known is not None and held and facts.retry in ("", known.retry):  # until the retry, or another version
        return UpgradeStep(known, hold=(known.from_version, spec.replicas))
    refusal = facts.unrunnable or too_little_room(facts)
    if refusal:
        return refuse(spec, running, refusal)
    why = not_ready(spec, facts)
    if why is not None:
        waiting = UpgradeState(running, spec.version, WAITING, message=why, retry=facts.retry)
        return UpgradeStep(waiting, hold=(running, spec.replicas))
    message = f"stopping every pod to upgrade {facts.primary}'s data from PostgreSQL {running} to {spec.version}"
    stopping = UpgradeState(
        running, spec.version, STOPPING, facts.now, facts.primary, message=message, retry=facts.retry
    )
    return UpgradeStep(stopping, hold=(running, 0), check_job=True, events=(("Normal", STARTED, message),))


def refuse(spec: DatabaseSpec, running: str, why: str) -> UpgradeStep:
    """Refused with every pod serving: the old major at the spec's replicas; status tells it as a problem."""
    message = (
        f"PostgreSQL {running} to {spec.version} refused before any pod stopped: {why}; PostgreSQL {running} serves on"
    )
    return UpgradeStep(UpgradeState(running, spec.version, REFUSED, message=message), hold=(running, spec.replicas))


def refuse_stop(step: UpgradeStep, spec: DatabaseSpec, why: str) -> UpgradeStep:
    """STEP was to stop every pod, but its Job cannot be built (WHY): refused instead, nothing stopped."""
    running = step.state.from_version if step.state is not None else spec.version
    return replace(refuse(spec, running, why), events=tuple(e for e in step.events if e[1] != STARTED))


def stopping(known: UpgradeState, facts: Facts) -> UpgradeStep:
    """The pods stop at the old version; once none is left, the Job."""
    down = (known.from_version, 0)
    if facts.pods:
        return UpgradeStep(known, hold=down)
    job = names.major_upgrade_job(facts.release, known.started_at)
    upgrading = replace(known, phase=UPGRADING, message=upgrading_message(known), job=job)
    return UpgradeStep(upgrading, hold=down, start_job=True)


def abandoned(spec: DatabaseSpec, known: UpgradeState, facts: Facts) -> UpgradeStep:
    """spec.version changed while the pods stop, before the Job was made: the attempt is dropped and the spec
    starts over from the old major (its pods come back, or the new target's own checks run)."""
    told = (
        f"PostgreSQL {known.from_version} to {known.to_version} abandoned before pg_upgrade ran: "
        f"spec.version is {spec.version} now; the data is untouched"
    )
    fresh = request(spec, None, replace(facts, running=known.from_version))
    return replace(fresh, events=(("Normal", "MajorUpgradeAbandoned", told), *fresh.events))


def upgrading(spec: DatabaseSpec, known: UpgradeState, facts: Facts) -> UpgradeStep:
    """The Job was made: its outcome comes first, whatever the spec says now (pg_upgrade --link cannot be
    stopped half way); the pods stay down at the old version until then."""
    down = (known.from_version, 0)
    outcome = job_outcome(facts.job)
    if outcome is None:  # the Job runs (the message again: a failed start may have told why it waited), or is made
        running = replace(known, message=upgrading_message(known)) if facts.job is not None else known
        return UpgradeStep(running, hold=down, start_job=facts.job is None)
    if outcome == FAILED and job_active(facts.job):
        return UpgradeStep(replace(known, message=f"the Job {known.job} failed; waiting for its pod to end"), hold=down)
    if outcome == FAILED:
        return failed(spec, known, facts, facts.job_failure or f"the Job {known.job} failed")
    message = f"starting PostgreSQL {known.to_version} on the upgraded data; the replicas are cloned from it"
    return UpgradeStep(replace(known, phase=STARTING, message=message), hold=new_major_hold(spec, known))


def failed(spec: DatabaseSpec, known: UpgradeState, facts: Facts, why: str) -> UpgradeStep:
    """The attempt ended without an upgrade: the old major's pods start again at the spec's count; one Warning."""
    message = f"{why}; the pods start again on PostgreSQL {known.from_version}"
    done = replace(known, phase=FAILED, message=message, finished_at=facts.now)
    event = ("Warning", "MajorUpgradeFailed", f"PostgreSQL {known.from_version} to {known.to_version}: {message}")
    return UpgradeStep(done, hold=(known.from_version, spec.replicas), events=(event,))


def not_made(spec: DatabaseSpec, known: UpgradeState, facts: Facts, why: str) -> UpgradeStep:
    """The pods are down but the Job cannot be made (WHY: it cannot be built, or the API refuses it): failed,
    rather than the pods left at 0 for a Job that will never run."""
    return failed(spec, replace(known, job=""), facts, f"the upgrade Job could not be made: {why}")


def upgrading_message(known: UpgradeState) -> str:
    return f"pg_upgrade of {known.primary}'s data from PostgreSQL {known.from_version} to {known.to_version}"


def new_major_hold(spec: DatabaseSpec, known: UpgradeState) -> tuple[str, int] | None:
    """The data is of the new major now: it runs, whatever major the spec asked for since (a later one
    upgrades next; an earlier one is refused, policy/version_change.py)."""
    return None if spec.major == major(known.to_version) else (known.to_version, spec.replicas)


def starting(spec: DatabaseSpec, known: UpgradeState, facts: Facts) -> UpgradeStep:
    """The new major's primary serves: ANALYZE (pg_upgrade keeps no statistics), then done."""
    hold = new_major_hold(spec, known)
    primary = facts.probes.get(known.primary)
    if not isinstance(primary, InstanceFacts) or primary.in_recovery or not primary.version:
        return UpgradeStep(known, hold=hold)
    if major(primary.version) != major(known.to_version):
        return UpgradeStep(known, hold=hold)
    message = f"upgraded from PostgreSQL {known.from_version} to {primary.version}; statistics gathered (ANALYZE)"
    done = replace(known, phase=SUCCEEDED, message=message, finished_at=facts.now)
    return UpgradeStep(done, hold=hold, analyze=True, events=(("Normal", "MajorUpgradeSucceeded", message),))
