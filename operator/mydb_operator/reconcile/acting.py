"""Acting: prerequisites, the credentials Secret, claim growth, then helm upgrade --install."""

from __future__ import annotations

import logging

from ..cluster.api import ApiPort
from ..cluster.failures import API_FAILURES, failure_detail, refused
from ..helm.errors import HelmError
from ..model.observation import Observation
from ..policy.operations import applied_summary, operation_kind
from ..status.problem import Problem
from .clock import now
from .observing import observe_after_helm
from .outcomes import Outcome, Target
from .planning import Decision
from .prerequisites import ensure_credentials, missing_prerequisite
from .runtime import Runtime

log = logging.getLogger(__name__)


async def grow_storage(api: ApiPort, namespace: str, name: str, size: str, observed: Observation) -> str:
    """Grow every data claim, then drop the StatefulSet (keeping its pods) so Helm can re-create it."""
    for claim in observed.claims:
        await api.grow_claim(namespace, claim["metadata"]["name"], size)
    await api.orphan_statefulset(namespace, name)
    return f"growing {len(observed.claims)} claims to {size}; StatefulSet re-created around its running pods"


async def act(target: Target, observed: Observation, decision: Decision, runtime: Runtime) -> Outcome:
    """Prerequisites, the credentials Secret, claim growth, then helm upgrade --install."""
    namespace, name, spec = target.namespace, target.name, target.spec
    outcome = decision.unchanged(target, observed)
    secret_created: str | None = None
    blocker = await missing_prerequisite(runtime.api, namespace, spec, observed, first_install=not target.applied)
    if blocker is None:
        secret_created, blocker = await ensure_credentials(
            runtime.api, namespace, name, spec, first_install=not target.applied, port=runtime.port
        )
    if blocker is not None:
        outcome.problem = blocker
        return outcome
    if decision.storage.grow or decision.recreate:
        try:
            if decision.storage.grow:
                told = await grow_storage(runtime.api, namespace, name, spec.storage, observed)
                outcome.events.append(("Normal", "Resizing", told))
            else:
                await runtime.api.orphan_statefulset(namespace, name)
                log.info(
                    "%s/%s: StatefulSet re-created around its running pods: %s", namespace, name, decision.recreate
                )
        except TimeoutError as error:  # the old StatefulSet never went away
            outcome.problem = Problem("ResizeStalled" if decision.storage.grow else "RecreateStalled", str(error))
            return outcome
        except API_FAILURES as error:
            if not refused(error):
                raise  # unreachable or failing: the daemon's back-off tries again
            # A quota, a policy or the volume's driver said no: status says which, Helm waits.
            outcome.problem = Problem("ResizeFailed", f"growing the claims to {spec.storage}: {failure_detail(error)}")
            return outcome
    if decision.repair:
        # A namespace being deleted takes the objects first and the database (its finalizer) last: nothing
        # is put back there (Helm would be refused). The failed pass lets the database go (namespace_deletion).
        if await runtime.api.namespace_terminating(namespace):
            outcome.problem = Problem("NamespaceDeleting", f"the namespace is being deleted: {decision.why}")
            return outcome
        # Said before Helm runs: a run that fails after changing objects still names the drift.
        log.info("%s/%s: putting back a change made outside the operator: %s", namespace, name, decision.why)
    try:
        result = await runtime.helm.upgrade(namespace, name, decision.values)
    except HelmError as error:
        if secret_created:
            outcome.events.insert(0, ("Normal", "CredentialsCreated", secret_created))
        outcome.problem = Problem("HelmFailed", str(error))
        return outcome
    outcome.helm_ran = True
    summary = applied_summary(decision.effective)
    kind = operation_kind((target.applied or {}).get("spec"), summary, decision.repair)
    outcome.applied = {
        "name": result.name,
        "revision": result.revision,
        "chart": result.chart,
        "appliedHash": decision.values_hash,
        "status": result.status,
        "spec": summary,
    }
    outcome.operation = {"type": kind, "startedAt": now(), "result": "InProgress"}
    told = f"helm revision {result.revision} applied: {kind}, {decision.why}"
    log.info("%s/%s: %s%s", namespace, name, told, f"; {secret_created}" if secret_created else "")
    if target.applied:
        # The install is told by status (release, lastOperation): no Event, one API write per database
        # fewer. Each later revision gets one: the history that status does not keep.
        outcome.events.append(("Normal", "Applied", told))
    outcome.observed = await observe_after_helm(namespace, name, decision.effective, runtime)
    return outcome
