"""A major upgrade's pass: read its facts, take the step policy/major_upgrade.py gives, carry it out.

What can be checked before a pod stops is checked here first: the platform's
images for the new version (desired/platform.py), the room on the primary's
volume as last measured (status.storage), and the upgrade Job itself, built
from the new major's render (desired/upgrade_job.py). A request that fails one
is refused with every pod serving. Once the pods are down, a Job that cannot
be made fails the attempt, and the old major starts again."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail, refused
from ..desired.platform import PlatformError, unoffered, unpinned
from ..desired.upgrade_job import UpgradeJobError, major_upgrade_job
from ..desired.values import database_values
from ..helm.errors import HelmError
from ..instances import commands
from ..model.errors import SpecError
from ..model.observation import Observation
from ..model.pods import failed_words
from ..model.record import recorded_primary
from ..model.spec import DatabaseSpec
from ..model.statefulset import running_version
from ..policy.major_upgrade import (
    FAILED,
    STARTING,
    UNDER_WAY,
    UPGRADING,
    UpgradeState,
    UpgradeStep,
    known_state,
    next_step,
    not_made,
    refuse_stop,
)
from ..policy.upgrade_facts import MIN_FREE_MB, Facts, job_outcome, measured_free_mb
from ..status.warnings import Event
from .clock import now
from .primary_pass import Topology
from .runtime import Runtime
from .servers import Servers

log = logging.getLogger(__name__)
Object = dict[str, Any]
RECHECK_SECONDS = 5.0  # while the pods stop and the Job runs: their changes wake the pass too


@dataclass
class Upgrade:
    """What the pass did for a major upgrade: the state for status, what Helm must apply instead of the spec."""

    state: UpgradeState | None = None
    hold: tuple[str, int] | None = None
    events: list[Event] = field(default_factory=list)
    recheck: float | None = None


def upgrade_under_way(previous: dict[str, Any]) -> bool:
    """The last pass left the pods stopping, or the Job running."""
    known = known_state(previous)
    return known is not None and known.phase in UNDER_WAY


async def keep_upgrade(
    namespace: str,
    name: str,
    spec: DatabaseSpec | None,
    annotations: dict[str, str],
    previous: dict[str, Any],
    observed: Observation,
    topology: Topology,
    runtime: Runtime,
    uid: str = "",
) -> Upgrade:
    """Read the upgrade's facts, take the step the policy gives, carry it out (UID: the MyDatabase's)."""
    known = known_state(previous)
    if spec is None:
        return Upgrade(known)
    job = next((j for j in observed.jobs if known and j["metadata"]["name"] == known.job), None)
    primary = recorded_primary(name, topology.record)
    facts = Facts(
        running=running_version(observed.statefulset),
        primary=primary,
        pods=tuple(observed.pods),
        probes=topology.probes,
        job=job,
        job_failure=await job_failure(runtime, namespace, job) if ending(known, job) else "",
        retry=annotations.get(names.RETRY_UPGRADE_ANNOTATION, ""),
        now=now(),
        release=name,
        unrunnable=unoffered(runtime.platform, spec.major) or unpinned(runtime.platform, spec.version) or "",
        free_mb=measured_free_mb(previous.get("storage"), primary),
    )
    step = next_step(spec, known, facts)
    made = Made(namespace, name, spec, observed, runtime, uid)
    if step.check_job and step.state is not None:  # every pod is about to stop: the Job must be possible first
        built = await made.build(step.state)
        if isinstance(built, str):
            log.warning("%s/%s: major upgrade refused: %s", namespace, name, built)
            step = refuse_stop(step, spec, built)
    if step.start_job and step.state is not None and known is not None:
        step = await made.start(step, step.state, known, facts)
    done = Upgrade(step.state, step.hold, list(step.events))
    if step.state is not None and step.state.phase in (*UNDER_WAY, STARTING):
        done.recheck = RECHECK_SECONDS
    if step.analyze and step.state is not None:
        servers = Servers(namespace, name, spec, runtime)
        pods = list(observed.pods)
        if not await servers.command(pods, step.state.primary, "gather statistics", commands.analyze):
            return Upgrade(known, None, [], RECHECK_SECONDS)  # the next pass tries again
    return done


def ending(known: UpgradeState | None, job: Object | None) -> bool:
    """The Job failed and the upgrade does not know it yet (its pod is read once, not on every pass)."""
    return known is not None and known.phase == UPGRADING and job_outcome(job) == FAILED


async def job_failure(runtime: Runtime, namespace: str, job: Object | None) -> str:
    """Why the upgrade Job failed: its container's last words (major-upgrade.sh's refusal, pg_upgrade's)."""
    if job is None:
        return ""
    try:
        pods = await runtime.api.job_pods(namespace, job["metadata"]["name"])
    except API_FAILURES as error:
        return f"the Job {job['metadata']['name']} failed (its pod could not be read: {failure_detail(error)})"
    said = (failed_words(pod) for pod in pods)
    return next((words for words in said if words), "")


@dataclass(frozen=True)
class Made:
    """The upgrade Job of one database: built from the new major's render, then created."""

    namespace: str
    name: str
    spec: DatabaseSpec
    observed: Observation
    runtime: Runtime
    uid: str

    async def build(self, state: UpgradeState) -> Object | str:
        """The Job for STATE's attempt, or why it cannot be built."""
        template = ((self.observed.statefulset or {}).get("spec") or {}).get("template") or {}
        containers = (template.get("spec") or {}).get("containers") or []
        old_image = next((c.get("image") for c in containers if c.get("name") == names.POSTGRES_CONTAINER), None)
        if not old_image:
            return f"the StatefulSet of PostgreSQL {state.from_version} is gone: its image is unknown"
        runtime = self.runtime
        try:
            new = dataclasses.replace(self.spec, version=state.to_version)
            owner = self.uid if runtime.owns_children else ""
            values = database_values(self.name, new, runtime.platform, owner, runtime.chart_keys)
            rendered = await runtime.helm.template(self.namespace, self.name, values)
        except (HelmError, SpecError, PlatformError) as error:
            return f"the upgrade Job cannot be built: {error}"
        statefulset = next(
            (o for o in rendered if o.get("kind") == "StatefulSet" and o["metadata"]["name"] == self.name), None
        )
        if statefulset is None:
            return "the upgrade Job cannot be built: the chart renders no StatefulSet"
        job = state.job or names.major_upgrade_job(self.name, state.started_at)
        try:
            return major_upgrade_job(statefulset, self.name, job, state.primary, old_image, MIN_FREE_MB)
        except UpgradeJobError as error:
            return f"the upgrade Job cannot be built: {error}"

    async def start(self, step: UpgradeStep, state: UpgradeState, known: UpgradeState, facts: Facts) -> UpgradeStep:
        """Create the Job of STEP (whose STATE names it). One that cannot be built or that the API refuses fails
        the attempt (the old major starts again); an API that does not answer leaves KNOWN's phase, tried
        again next pass."""
        built = await self.build(state)
        if isinstance(built, str):
            log.warning("%s/%s: %s", self.namespace, self.name, built)
            return not_made(self.spec, state, facts, built.removeprefix("the upgrade Job cannot be built: "))
        try:
            if await self.runtime.api.create_job_once(built):
                log.info("%s/%s: major upgrade Job %s started", self.namespace, self.name, state.job)
        except API_FAILURES as error:
            why = f"the upgrade Job could not be created: {failure_detail(error)}"
            log.warning("%s/%s: %s", self.namespace, self.name, why)
            if refused(error) and getattr(error, "status", None) != 429:  # quota, policy, invalid: no use waiting
                return not_made(self.spec, state, facts, f"the API refused it: {failure_detail(error)}")
            return dataclasses.replace(step, state=dataclasses.replace(known, message=why), start_job=False)
        return step
