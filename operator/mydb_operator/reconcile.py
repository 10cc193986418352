"""One reconciliation of one database: spec -> values -> Helm (only when needed) -> status."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from . import api, backups, kube, lifecycle, metrics, observe
from .children import ChildStore
from .credentials import credentials_secret, missing_keys
from .helm import Helm, HelmError
from .model import DatabaseSpec, SpecError, parse_spec
from .observe import Observation
from .status import Problem, build_status, role_of
from .platform import Platform, PlatformError
from .values import backups_claim_name, database_values, release_hash

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    """What every reconcile shares: Helm, the informers' cache and the platform's customization."""
    helm: Helm
    children: ChildStore
    platform: Platform = field(default_factory=Platform)
    # Twice the Helm slots may act at once (see converge()): the next databases
    # read and prepare while Helm runs for others.
    acting: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "acting", asyncio.Semaphore(2 * self.helm.max_parallel))


CATCH_UP_SECONDS = 3.0  # how long the cache may take to show what Helm applied before the API is read


async def observe_fresh(name: str, namespace: str, runtime: Runtime) -> Observation:
    """From the API, for decisions that act; the cache then waits to catch up with what it saw."""
    seen = await observe.read(name, namespace)
    metrics.OBSERVATIONS.labels("api").inc()
    runtime.children.await_statefulset(namespace, name, seen.statefulset)
    return seen


async def observe_after_helm(name: str, namespace: str, spec: DatabaseSpec, runtime: Runtime) -> Observation:
    """What Helm just applied, for the status: one read of the StatefulSet, then the cache once
    it shows that version and every object of the release (the whole API read if it lags)."""
    runtime.children.await_statefulset(namespace, name, await kube.read_statefulset(namespace, name))
    seen = await runtime.children.caught_up(namespace, name, lambda s: missing_child(spec, s, name) is None,
                                            CATCH_UP_SECONDS)
    if seen is None:
        return await observe_fresh(name, namespace, runtime)
    metrics.OBSERVATIONS.labels("cache").inc()
    return seen


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    problem: Problem | None = None


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def missing_child(spec: DatabaseSpec, seen: Observation, release: str) -> str | None:
    """Which object of the release is not there, or None."""
    if seen.statefulset is None:
        return "the StatefulSet is missing"
    missing = {release, f"{release}-ro", f"{release}-headless"} - set(seen.services)
    if missing:
        return f"Service {sorted(missing)[0]} is missing"
    if spec.backup and seen.cronjob is None:
        return "the backup CronJob is missing"
    return None


def drift(spec: DatabaseSpec, values: dict[str, Any], seen: Observation, release: str) -> str | None:
    """Why the live objects no longer match the release, or None. Helm puts them back."""
    missing = missing_child(spec, seen, release)
    if missing:
        return missing
    sts_spec = seen.statefulset.get("spec") or {}
    if sts_spec.get("replicas") != values["replicas"]:
        return f"the StatefulSet has {sts_spec.get('replicas')} replicas instead of {values['replicas']}"
    if seen.cronjob and spec.backup and (seen.cronjob.get("spec") or {}).get("schedule") != spec.backup.schedule:
        return "the backup CronJob's schedule was changed"
    return None


async def expansion_allowed(spec: DatabaseSpec, seen: Observation) -> bool | None:
    """Whether the data claims' StorageClass allows expansion (None: no such class)."""
    class_name = next((c["spec"].get("storageClassName") for c in seen.claims), None) or spec.storage_class_name
    found = await (kube.storage_class(class_name) if class_name else kube.default_storage_class())
    return None if found is None else bool(found.get("allowVolumeExpansion"))


async def plan_changes(spec: DatabaseSpec, seen: Observation) -> tuple[DatabaseSpec, lifecycle.StoragePlan, str | None]:
    """The spec Helm may apply now, the storage plan, and why the version was held back.

    Held-back parts keep their running value, so everything else in the spec
    still rolls out."""
    running = lifecycle.running_version(seen.statefulset)
    refusal = lifecycle.version_refusal(spec, running)
    effective = dataclasses.replace(spec, version=running) if refusal else spec
    template_size = lifecycle.claim_template_size(seen.statefulset)
    allowed = await expansion_allowed(spec, seen) if template_size and template_size != spec.storage else None
    plan = lifecycle.storage_plan(spec, template_size, allowed)
    return dataclasses.replace(effective, storage=plan.chart_size), plan, refusal


async def missing_prerequisite(namespace: str, spec: DatabaseSpec, seen: Observation,
                               first_install: bool) -> Problem | None:
    """What Helm would not notice but the pods would: a missing StorageClass or restore source."""
    if spec.storage_class_name and not seen.claims and await kube.storage_class(spec.storage_class_name) is None:
        # Helm would succeed and leave every pod Pending on an unbindable claim.
        return Problem("StorageClassNotFound",
                       f"spec.storageClassName: StorageClass {spec.storage_class_name} does not exist")
    source = backups_claim_name(spec.restore.from_database) if spec.restore else None
    if source and first_install and not await kube.claim_exists(namespace, source):
        return Problem("RestoreSourceMissing",
                       f"spec.restore.fromDatabase: no backups volume {source} in namespace {namespace}")
    return None


async def grow_storage(name: str, namespace: str, size: str, seen: Observation) -> str:
    """Grow every data claim, then drop the StatefulSet (keeping its pods) so Helm can re-create it."""
    for claim in seen.claims:
        await kube.grow_claim(namespace, claim["metadata"]["name"], size)
    await kube.orphan_statefulset(namespace, name)
    return f"growing {len(seen.claims)} claims to {size}; StatefulSet re-created around its running pods"


async def ensure_credentials(name: str, namespace: str, spec: DatabaseSpec,
                             first_install: bool) -> tuple[str | None, Problem | None]:
    """Create the operator's Secret before the first install, or check the user's; (event message, problem)."""
    if spec.existing_secret:
        secret = await kube.read_secret(namespace, spec.existing_secret)
        if secret is None:
            return None, Problem("CredentialsMissing", f"spec.credentials.secretName: Secret "
                                 f"{spec.existing_secret} does not exist in namespace {namespace}")
        missing = missing_keys(secret)
        if missing:
            return None, Problem("CredentialsInvalid", f"spec.credentials.secretName: Secret "
                                 f"{spec.existing_secret} lacks the keys {', '.join(missing)}")
        return None, None
    if not first_install:  # made before the first install; never rotated, never re-made silently
        return None, None
    body = credentials_secret(name, namespace)
    if await kube.create_secret_once(body):
        return f"created Secret {body['metadata']['name']} with random passwords", None
    return None, None


@dataclass
class Converged:
    """What one pass of converge() did: the release now applied and what to report."""
    seen: Observation
    applied: dict[str, Any] | None
    operation: dict[str, Any] | None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    problem: Problem | None = None
    storage_blocked: str | None = None  # the database runs; only the growth waits


@dataclass
class Decision:
    """What converge() makes of one observation: why Helm must run (None: it need not), and with what."""
    why: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    wanted: str = ""  # the release hash of `values`
    repair: bool = False  # the values are applied already; the live objects drifted
    effective: DatabaseSpec | None = None  # the spec Helm may apply now (held-back parts at their running value)
    storage: lifecycle.StoragePlan | None = None
    problem: Problem | None = None
    storage_blocked: str | None = None


async def decide(name: str, spec: DatabaseSpec, seen: Observation, applied: dict[str, Any] | None,
                 runtime: Runtime) -> Decision:
    effective, storage, refusal = await plan_changes(spec, seen)
    decision = Decision(effective=effective, storage=storage, storage_blocked=storage.refusal,
                        problem=Problem("ChangeRefused", refusal) if refusal else None)
    try:
        decision.values = database_values(name, effective, runtime.platform)
    except (SpecError, PlatformError) as error:
        decision.problem = Problem("InvalidSpec" if isinstance(error, SpecError) else "PlatformPatchFailed", str(error))
        return decision
    decision.wanted = release_hash(runtime.helm.digest, decision.values)
    decision.repair = bool(applied and applied.get("appliedHash") == decision.wanted)
    if decision.repair:
        decision.why = drift(effective, decision.values, seen, name)  # usually None: nothing to do
    else:
        decision.why = "first install" if not applied else "spec or chart changed"
    return decision


async def converge(name: str, namespace: str, spec: DatabaseSpec, seen: Observation,
                   applied: dict[str, Any] | None, operation: dict[str, Any] | None, runtime: Runtime,
                   fresh: bool = False) -> Converged:
    """Run Helm if the values changed or a child drifted; grow storage first when asked.

    `seen` may come from the cache (fresh=False); anything that acts is decided
    again on a fresh API read, so a cache a moment behind never runs Helm. The
    one exception is a first install onto nothing: Helm runs whatever a read
    would show, and with no StatefulSet or claim there is no version or size
    to hold back."""
    decision = await decide(name, spec, seen, applied, runtime)
    if decision.why is None:
        return Converged(seen, applied, operation, problem=decision.problem, storage_blocked=decision.storage_blocked)
    onto_nothing = not applied and seen.statefulset is None and not seen.claims
    # Only a few databases act at once: hundreds of reconciles waiting for a Helm
    # slot, each holding a fresh read of whole objects, were most of the peak memory.
    async with runtime.acting:
        if not (fresh or onto_nothing):
            seen = await observe_fresh(name, namespace, runtime)
            decision = await decide(name, spec, seen, applied, runtime)
            if decision.why is None:
                return Converged(seen, applied, operation, problem=decision.problem,
                                 storage_blocked=decision.storage_blocked)
        return await act(name, namespace, spec, seen, applied, operation, decision, runtime)


async def act(name: str, namespace: str, spec: DatabaseSpec, seen: Observation, applied: dict[str, Any] | None,
              operation: dict[str, Any] | None, decision: Decision, runtime: Runtime) -> Converged:
    """Prerequisites, the credentials Secret, claim growth, then helm upgrade --install."""
    done = Converged(seen=seen, applied=applied, operation=operation, problem=decision.problem,
                     storage_blocked=decision.storage_blocked)
    blocker = await missing_prerequisite(namespace, spec, seen, first_install=not applied)
    if blocker is None:
        created, blocker = await ensure_credentials(name, namespace, spec, first_install=not applied)
        if created:
            done.events.append(("Normal", "CredentialsCreated", created))
    if blocker is not None:
        done.problem = blocker
        return done
    try:
        if decision.storage.grow:
            done.events.append(("Normal", "Resizing", await grow_storage(name, namespace, spec.storage, seen)))
        result = await runtime.helm.upgrade(name, namespace, decision.values)
    except (HelmError, TimeoutError) as error:
        done.problem = Problem("HelmFailed" if isinstance(error, HelmError) else "ResizeStalled", str(error))
        return done
    summary = lifecycle.applied_summary(decision.effective)
    kind = lifecycle.operation_kind((applied or {}).get("spec"), summary, decision.repair)
    done.applied = {"name": result.name, "revision": result.revision, "chart": result.chart,
                    "appliedHash": decision.wanted, "status": result.status, "spec": summary}
    done.operation = {"type": kind, "startedAt": now(), "result": "InProgress"}
    log.info("%s/%s: helm revision %d applied (%s: %s)", namespace, name, result.revision, kind, decision.why)
    done.events.append(("Normal", "Applied", f"helm revision {result.revision} applied: {kind}, {decision.why}"))
    done.seen = await observe_after_helm(name, namespace, decision.effective, runtime)
    return done


async def backup_on_demand(name: str, namespace: str, annotations: dict[str, str], previous: dict[str, Any],
                           seen: Observation) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Turn a new myapp.example.com/backup-now annotation into a Job, once per value."""
    earlier = {k: v for k, v in (previous.get("backup") or {}).items() if k.startswith("lastOnDemand")}
    token = backups.requested(annotations, previous)
    if token is None:
        return earlier, []
    if seen.cronjob is None:
        return {"lastOnDemandRequest": token}, [
            ("Warning", "BackupNotConfigured", f"backup-now={token} ignored: spec.backup is not set")]
    job = backups.on_demand_job(seen.cronjob, name, token)
    await kube.create_job_once(job)
    log.info("%s/%s: on-demand backup %s started as Job %s", namespace, name, token, job["metadata"]["name"])
    return ({"lastOnDemandRequest": token, "lastOnDemandJob": job["metadata"]["name"]},
            [("Normal", "BackupRequested", f"backup-now={token}: started Job {job['metadata']['name']}")])


async def label_roles(namespace: str, pods: list[dict[str, Any]]) -> None:
    """Label each pod primary or replica; the read-write and read-only Services select on it."""
    for pod in pods:
        role = role_of(pod)
        if (pod["metadata"].get("labels") or {}).get(api.ROLE_LABEL) != role:
            await kube.label_pod(namespace, pod["metadata"]["name"], api.ROLE_LABEL, role)


async def reconcile(body: dict[str, Any], known_status: dict[str, Any] | None, runtime: Runtime) -> Outcome:
    meta = body["metadata"]
    name, namespace, generation = meta["name"], meta["namespace"], meta.get("generation", 1)
    previous = known_status if known_status is not None else dict(body.get("status") or {})
    cached = runtime.children.observation(name, namespace)
    if cached is not None:
        metrics.OBSERVATIONS.labels("cache").inc()
    seen = cached if cached is not None else await observe_fresh(name, namespace, runtime)
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError as error:
        spec, done = None, Converged(seen, previous.get("release"), previous.get("lastOperation"),
                                     problem=Problem("InvalidSpec", str(error)))
    else:
        done = await converge(name, namespace, spec, seen, previous.get("release"),
                              previous.get("lastOperation"), runtime, fresh=cached is None)
    await label_roles(namespace, done.seen.pods)
    on_demand, backup_events = await backup_on_demand(name, namespace, meta.get("annotations") or {}, previous,
                                                      done.seen)
    done.events += backup_events
    status = build_status(
        release=name, namespace=namespace, generation=generation, spec=spec, observation=done.seen,
        applied=done.applied, problem=done.problem, previous=previous, now=now(), operation=done.operation,
        storage_blocked=done.storage_blocked, on_demand=on_demand,
    )
    done.events += warnings_for(previous, status)
    return Outcome(status=status, events=done.events, problem=done.problem)


ALARMS = {("Degraded", "True"), ("BackupHealthy", "False")}  # condition states worth a Warning


def warnings_for(previous: dict[str, Any], status: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning Event when a problem first shows (or changes), not on every retry."""
    before = {c["type"]: c for c in previous.get("conditions") or []}
    warnings = []
    for new in status["conditions"]:
        alarming = (new["type"], new["status"]) in ALARMS or new["reason"] == "ExpansionNotSupported"
        old = before.get(new["type"], {})
        if alarming and (old.get("reason"), old.get("message")) != (new["reason"], new["message"]):
            warnings.append(("Warning", new["reason"], new["message"]))
    return warnings


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch from previous to new status (None when equal); dropped keys become null."""
    owned_previous = {k: v for k, v in previous.items() if k != "kopf"}
    if owned_previous == new:
        return None
    patch = dict(new)
    for key in owned_previous.keys() - new.keys():
        patch[key] = None
    return patch
