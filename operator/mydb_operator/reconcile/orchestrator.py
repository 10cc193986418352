"""One reconcile of one database, step by step: observe, converge, label, back up, build the status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..model.errors import SpecError
from ..model.spec import DatabaseSpec, parse_spec
from ..policy import backups
from ..policy.actions import FAILING_OVER, SWITCHING_OVER, WAITING
from ..policy.major_upgrade import upgraded_now
from ..status.build import Happened, Wanted, build_status
from ..status.phases import DEPLOYING, PENDING
from ..status.primary import PrimaryView
from ..status.problem import Problem
from ..status.warnings import archive_fork_warnings, checksum_warnings, kept_data_warnings, warnings_for
from .application import keep_application
from .certificates import CertificateState, keep_certificates, reload_where_due
from .clock import now
from .converging import converge
from .observing import from_cache, observe_fresh
from .on_demand_backup import backup_on_demand, verify_on_demand
from .outcomes import Outcome, Target
from .runtime import Runtime
from .topology import keep_primary
from .upgrading import keep_upgrade, upgrade_under_way
from .volumes import keep_volumes

DEFERRED_RECHECK_SECONDS = 1.0  # Helm left for later while the primary moves: looked at again this soon


async def reconcile(body: dict[str, Any], known_status: dict[str, Any] | None, runtime: Runtime) -> Outcome:
    meta = body["metadata"]
    namespace, name, generation = meta["namespace"], meta["name"], meta.get("generation", 1)
    previous = known_status if known_status is not None else dict(body.get("status") or {})
    cached = from_cache(namespace, name, runtime)
    observed = cached if cached is not None else await observe_fresh(namespace, name, runtime)
    spec: DatabaseSpec | None = None
    problem: Problem | None = None
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError as error:
        problem = Problem("InvalidSpec", str(error))
    volumes = await keep_volumes(
        namespace, name, spec, previous, observed, runtime.api, runtime.summaries, datetime.now(UTC)
    )
    spec = volumes.spec  # its storage as storageAutoGrow grew it
    # The primary first: a failover must not wait behind a Helm run.
    annotations = meta.get("annotations") or {}
    # While a major upgrade stops the pods, nothing fails over: they stop on purpose.
    still = upgrade_under_way(previous)
    topology = await keep_primary(
        namespace,
        name,
        spec,
        annotations,
        previous,
        observed,
        runtime,
        still=still,
        full=volumes.full_pods,
        was_full=volumes.was_full,
    )
    uid = meta.get("uid", "")
    upgrade = await keep_upgrade(namespace, name, spec, annotations, previous, observed, topology, runtime, uid)
    continuous = spec is not None and spec.backup is not None and spec.backup.continuous and not spec.hibernate
    if continuous and upgraded_now(previous, upgrade.state):
        assert upgrade.state is not None
        previous = backups.for_a_new_major(previous, upgrade.state.from_version, upgrade.state.finished_at)
    certificates = CertificateState()
    if spec is not None:
        first_install = not previous.get("release")
        certificates = await keep_certificates(
            namespace, name, spec, annotations, previous, runtime, datetime.now(UTC), before_helm=first_install
        )
        problem = certificates.problem
    if spec is None or problem is not None:
        outcome = Outcome(observed, previous.get("release"), previous.get("lastOperation"), problem=problem)
    else:
        target = Target(
            namespace, name, spec, previous.get("release"), previous.get("lastOperation"), uid, upgrade.hold
        )
        moving = topology.plan.state in (WAITING, FAILING_OVER, SWITCHING_OVER)
        outcome = await converge(target, observed, runtime, fresh=cached is None, urgent=moving)
    if spec is not None:
        await reload_where_due(namespace, name, spec, certificates, topology.probes, outcome.observed.pods, runtime)
    application = await keep_application(
        namespace, name, spec, previous, topology.record, topology.probes, outcome.observed.pods, runtime
    )
    outcome.events = volumes.events + topology.events + upgrade.events + certificates.events + outcome.events
    outcome.events += application.events
    deferred = DEFERRED_RECHECK_SECONDS if outcome.deferred else None
    rechecks = (topology.recheck, upgrade.recheck, certificates.recheck, volumes.recheck, deferred)
    outcome.recheck = min((s for s in rechecks if s is not None), default=None)
    outcome.retry_soon = topology.failed
    outcome.reads_position = topology.reads_position
    on_demand, backup_events = await backup_on_demand(
        runtime.api,
        namespace,
        name,
        annotations,
        previous,
        outcome.observed,
        continuous,
        spec.major if spec is not None else 0,
    )
    scratch = spec.storage if spec is not None else "1Gi"
    verify_each = continuous and spec is not None and spec.backup is not None and spec.backup.verify
    verifying, verify_events = await verify_on_demand(
        runtime.api, namespace, name, annotations, previous, outcome.observed, scratch, verify_each
    )
    on_demand.update(verifying)
    outcome.events += backup_events + verify_events
    happened = Happened(
        observation=outcome.observed,
        applied=outcome.applied,
        problem=outcome.problem,
        operation=outcome.operation,
        storage_blocked=outcome.storage_blocked,
        on_demand=on_demand,
        primary=PrimaryView(topology.record, topology.probes, topology.plan, topology.note, topology.archived),
        upgrade=upgrade.state,
        tls=certificates.status,
        application=application.status,
        storage=volumes.status,
        full=volumes.full,
    )
    outcome.status = build_status(Wanted(name, namespace, generation, spec, runtime.port), happened, previous, now())
    outcome.events += (
        warnings_for(previous, outcome.status)
        + kept_data_warnings(previous, outcome.status)
        + archive_fork_warnings(previous, outcome.status)
        + checksum_warnings(previous, outcome.status)
    )
    if outcome.status.get("phase") not in (PENDING, DEPLOYING):  # up, hibernated or failed: its turn is over
        runtime.rollouts.leave((namespace, name))
    return outcome
