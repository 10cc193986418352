"""Deciding: what Helm may apply now, and whether (and why) it must run at all."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..cluster.api import ApiPort
from ..desired.platform import PlatformError
from ..desired.values import database_values, release_hash
from ..model.errors import SpecError
from ..model.observation import Observation
from ..model.record import parse_record
from ..model.spec import DatabaseSpec
from ..model.statefulset import claim_template_size, pod_management, running_version
from ..policy.drift import drift
from ..policy.maintenance import pods_kept
from ..policy.storage import StoragePlan, storage_plan
from ..policy.version_change import version_refusal
from ..status.problem import Problem
from .outcomes import Outcome, Target
from .runtime import Runtime


@dataclass
class Decision:
    """What converge() makes of one observation: why Helm must run (None: it need not), and with what."""

    effective: DatabaseSpec  # the spec Helm may apply now (held-back parts at their running value)
    storage: StoragePlan
    why: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    values_hash: str = ""  # the release hash of `values`, stored as status.release.appliedHash
    repair: bool = False  # the values are applied already; the live objects drifted
    problem: Problem | None = None
    # Why the StatefulSet must be re-created around its pods before Helm runs (an immutable field
    # changes), or None.
    recreate: str | None = None

    @property
    def storage_blocked(self) -> str | None:
        """Why the storage growth waits, while the rest of the spec still rolls out."""
        return self.storage.refusal

    def unchanged(self, target: Target, observed: Observation) -> Outcome:
        """The outcome while nothing is applied: the release and operation as the last pass left them."""
        return Outcome(
            observed, target.applied, target.operation, problem=self.problem, storage_blocked=self.storage_blocked
        )


async def expansion_allowed(api: ApiPort, spec: DatabaseSpec, observed: Observation) -> bool | None:
    """Whether the data claims' StorageClass allows expansion (None: no such class)."""
    class_name = next((c["spec"].get("storageClassName") for c in observed.claims), None) or spec.storage_class_name
    storage_class = await (api.storage_class(class_name) if class_name else api.default_storage_class())
    return None if storage_class is None else bool(storage_class.get("allowVolumeExpansion"))


async def plan_changes(
    api: ApiPort, release: str, spec: DatabaseSpec, observed: Observation, hold: tuple[str, int] | None = None
) -> tuple[DatabaseSpec, StoragePlan, str | None]:
    """The spec Helm may apply now, the storage plan, and why the version was held back.

    Held-back parts keep their running value, so everything else in the spec
    still rolls out. A scale-down that would remove the primary's pod waits
    until a switchover moved the primary below (reconcile/topology.py). HOLD:
    the version and replicas a major upgrade applies meanwhile."""
    running = running_version(observed.statefulset)
    refusal = version_refusal(spec, running)
    effective = dataclasses.replace(spec, version=running) if refusal and running else spec
    if hold is not None:
        effective = dataclasses.replace(effective, version=hold[0], replicas=hold[1])
    keeps = pods_kept(release, parse_record(observed.record), spec.replicas)
    if keeps is not None:
        effective = dataclasses.replace(effective, replicas=keeps)
    template_size = claim_template_size(observed.statefulset)
    allowed = await expansion_allowed(api, spec, observed) if template_size and template_size != spec.storage else None
    plan = storage_plan(spec, template_size, allowed)
    return dataclasses.replace(effective, storage=plan.chart_size), plan, refusal


async def decide(target: Target, observed: Observation, runtime: Runtime) -> Decision:
    """Why Helm must run for `target` as `observed` (None: it need not), with the values it would apply."""
    name, applied = target.name, target.applied
    effective, storage, refusal = await plan_changes(runtime.api, name, target.spec, observed, target.hold)
    decision = Decision(
        effective=effective,
        storage=storage,
        problem=Problem("ChangeRefused", refusal) if refusal else None,
    )
    try:
        owner_uid = target.uid if runtime.owns_children else ""
        decision.values = database_values(name, effective, runtime.platform, owner_uid, runtime.chart_keys)
    except (SpecError, PlatformError) as error:
        decision.problem = Problem("InvalidSpec" if isinstance(error, SpecError) else "PlatformPatchFailed", str(error))
        return decision
    decision.values_hash = release_hash(runtime.helm.digest, decision.values)
    live_policy = pod_management(observed.statefulset)
    if live_policy is not None and live_policy != runtime.pod_management:
        decision.recreate = f"podManagementPolicy {live_policy} -> {runtime.pod_management}"
    decision.repair = bool(applied and applied.get("appliedHash") == decision.values_hash)
    if decision.repair:
        decision.why = drift(effective, decision.values, observed, name)  # usually None: nothing to do
    else:
        decision.why = "first install" if not applied else "spec or chart changed"
    return decision
