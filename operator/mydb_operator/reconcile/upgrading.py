"""A major upgrade's pass: read its facts, take the step policy/major_upgrade.py gives, carry it out."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail
from ..desired.platform import PlatformError
from ..desired.upgrade_job import major_upgrade_job
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
    Facts,
    UpgradeState,
    job_outcome,
    known_state,
    next_step,
)
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
    facts = Facts(
        running=running_version(observed.statefulset),
        primary=recorded_primary(name, topology.record),
        pods=tuple(observed.pods),
        probes=topology.probes,
        job=job,
        job_failure=await job_failure(runtime, namespace, job) if ending(known, job) else "",
        retry=annotations.get(names.RETRY_UPGRADE_ANNOTATION, ""),
        now=now(),
        release=name,
    )
    step = next_step(spec, known, facts)
    done = Upgrade(step.state, step.hold, [step.event] if step.event else [])
    if step.state is not None and step.state.phase in (*UNDER_WAY, STARTING):
        done.recheck = RECHECK_SECONDS
    if step.start_job and step.state is not None:
        problem = await start_job(namespace, name, spec, step.state, observed, runtime, uid)
        if problem is not None:  # said in status.upgrade, and tried again on the next pass (no Event each time)
            log.warning("%s/%s: %s", namespace, name, problem)
            done.state = dataclasses.replace(step.state, message=problem)
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


async def start_job(
    namespace: str,
    name: str,
    spec: DatabaseSpec,
    state: UpgradeState,
    observed: Observation,
    runtime: Runtime,
    uid: str,
) -> str | None:
    """Render the new major's StatefulSet and start the Job from it; why it could not, or None."""
    template = ((observed.statefulset or {}).get("spec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    old_image = next((c["image"] for c in containers if c["name"] == names.POSTGRES_CONTAINER), None)
    if old_image is None:
        return "the StatefulSet of the old major is gone: its image is unknown"
    try:
        new = dataclasses.replace(spec, version=state.to_version)
        owner = uid if runtime.owns_children else ""
        values = database_values(name, new, runtime.platform, owner, runtime.chart_keys)
        rendered = await runtime.helm.template(namespace, name, values)
    except (HelmError, SpecError, PlatformError) as error:
        return f"the upgrade Job could not be made: {error}"
    statefulset = next((o for o in rendered if o.get("kind") == "StatefulSet" and o["metadata"]["name"] == name), None)
    if statefulset is None:
        return "the upgrade Job could not be made: the chart renders no StatefulSet"
    job = major_upgrade_job(statefulset, name, state.job, state.primary, old_image)
    try:
        if await runtime.api.create_job_once(job):
            log.info("%s/%s: major upgrade Job %s started (%s)", namespace, name, state.job, state.message)
    except API_FAILURES as error:
        return f"the upgrade Job could not be created: {failure_detail(error)}"
    return None
