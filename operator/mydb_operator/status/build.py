"""The whole .status as a pure function of what was wanted (Wanted) and what happened (Happened)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import names
from ..model.instances import InstanceFacts
from ..model.observation import Observation
from ..model.pods import is_ready, pod_failure, pod_ordinal
from ..model.record import recorded_primary
from ..model.spec import MAX_LAG_ON_FAILOVER, DatabaseSpec, lag_limit
from ..model.statefulset import pending_restart, postgres_image
from ..model.timestamps import parse_time
from ..policy import backups
from ..policy.archive import archive_health, archive_status, base_backups
from ..policy.major_upgrade import UNDER_WAY, UpgradeState
from .conditions import ConditionMaker, resizing_condition
from .phases import DEGRADED, DEPLOYING, FAILED, HIBERNATED, PENDING, RUNNING, assess, rolled_out
from .primary import PrimaryView, failover_condition_facts, primary_status, replicas_behind, routing_gap
from .problem import Problem
from .upgrade import calm_degraded, upgrade_problem


def endpoints(namespace: str, release: str, port: int) -> dict[str, str]:
    return {
        "primary": f"{names.service_host(namespace, names.read_write_service(release))}:{port}",
        "replicas": f"{names.service_host(namespace, names.read_only_service(release))}:{port}",
    }


@dataclass(frozen=True)
class Wanted:
    """The target: which database, and what its spec asks (None: the spec could not be read)."""

    release: str
    namespace: str
    generation: int  # metadata.generation: the spec the status speaks of
    spec: DatabaseSpec | None
    port: int = names.POSTGRES_PORT  # the servers' port, as the values give it (desired/values.postgres_port)


@dataclass(frozen=True)
class Happened:
    """The outcome of one pass: what was observed and what the steps did or could not do."""

    observation: Observation
    applied: dict[str, Any] | None = None  # status.release: what Helm holds
    problem: Problem | None = None  # what stopped the pass, if anything
    operation: dict[str, Any] | None = None  # status.lastOperation
    storage_blocked: str | None = None  # why the storage growth waits
    on_demand: Mapping[str, str] = field(default_factory=dict)  # the on-demand backup and verification Jobs
    primary: PrimaryView = field(default_factory=PrimaryView)  # the servers' answers and the primary's plan
    upgrade: UpgradeState | None = None  # a major upgrade's state (policy/major_upgrade.py)
    tls: Mapping[str, Any] = field(default_factory=dict)  # status.tls: the certificate (reconcile/certificates.py)
    application: Mapping[str, Any] = field(default_factory=dict)  # status.application (reconcile/application.py)
    storage: Mapping[str, Any] = field(default_factory=dict)  # status.storage: size, usage (reconcile/volumes.py)
    full: str | None = None  # the full data volumes, in status' words (policy/volumes.full_volumes)


def max_lag(spec: DatabaseSpec | None) -> int:
    return lag_limit(spec.max_lag_on_failover if spec is not None else MAX_LAG_ON_FAILOVER) or 0


def build_status(wanted: Wanted, happened: Happened, previous: dict[str, Any], now: str) -> dict[str, Any]:
    """Everything under .status, from facts only: the target, the outcome, the last status and the time.
    Equal inputs give an equal dict (no needless writes)."""
    release, spec, observation, view = wanted.release, wanted.spec, happened.observation, happened.primary
    make = ConditionMaker(tuple(previous.get("conditions") or ()), now, wanted.generation)
    pods = sorted((p for p in observation.pods if not p["metadata"].get("deletionTimestamp")), key=pod_ordinal)
    ready_pods = [p for p in pods if is_ready(p)]
    desired = 0 if spec is None or spec.hibernate else spec.replicas
    failures = [f for f in (pod_failure(p) for p in pods) if f]
    target = recorded_primary(release, view.record)
    problem = happened.problem or upgrade_problem(happened.upgrade)
    assessment = assess(
        problem=problem,
        hibernating=spec is not None and spec.hibernate,
        installed=happened.applied is not None,
        pods=len(pods),
        ready_pods=len(ready_pods),
        desired=desired,
        rolled_out=rolled_out(observation.statefulset, desired),
        failures=failures,
        primary=(view.plan.state, view.plan.message),
        routing=routing_gap(release, target, pods, observation.routes) if pods else None,
        upgrading=happened.upgrade.message if happened.upgrade and happened.upgrade.phase in UNDER_WAY else None,
        disk_full=happened.full,
        behind=replicas_behind(release, view, pods, max_lag(spec), parse_time(now) or datetime.now(UTC)),
    )
    phase, ready, reason, message = assessment.phase, assessment.ready, assessment.reason, assessment.message

    progressing = phase in (DEPLOYING, PENDING) or (phase == HIBERNATED and bool(pods))
    failing = phase in (DEGRADED, FAILED)
    moving, state, about = failover_condition_facts(view)
    calm = calm_degraded(happened.upgrade, bool(ready_pods) or desired == 0, reason, message)
    conditions = [
        make("Ready", ready, reason, message),
        make(
            "Progressing",
            progressing,
            reason if progressing else "Stable",
            message if progressing else "nothing is changing",
        ),
        make("Degraded", failing, reason if failing else calm[0], message if failing else calm[1]),
        resizing_condition(spec, observation, happened.storage_blocked, make),
        make("Failover", moving, state, about),
    ]
    status: dict[str, Any] = {
        "ready": ready,
        "phase": phase,
        "message": message,
        "readyReplicas": len(ready_pods),
        "replicas": len(pods),
        "selector": names.label_selector(names.selector_labels(release)),
        "observedGeneration": wanted.generation,
        "conditions": conditions,
        "endpoints": endpoints(wanted.namespace, release, wanted.port),
    }
    image = postgres_image(observation.statefulset)
    if image:
        status["image"] = image
    restarting = pending_restart(observation.statefulset, pods)
    status["pendingRestart"] = bool(restarting)
    if happened.operation:
        settled = phase == RUNNING or (phase == HIBERNATED and not pods)
        status["lastOperation"] = finish_operation(happened.operation, settled, problem, now)
    status.update(primary_status(release, view, pods, previous))
    if happened.applied:
        status["release"] = happened.applied
    if happened.upgrade is not None:
        status["upgrade"] = happened.upgrade.as_status()
    if happened.tls:
        status["tls"] = tls_status(happened.tls, view)
    if happened.application:
        status["application"] = dict(happened.application)
    if happened.storage:
        status["storage"] = dict(happened.storage)
    backup = {**backups.facts(observation.cronjob, observation.jobs), **happened.on_demand}
    known = (previous.get("backup") or {}).get("lastVerification") or {}
    verified = backups.verification(observation.jobs, backup.get("lastVerificationJob"), known)
    if verified:
        backup["lastVerification"] = verified
    earlier = (previous.get("backup") or {}).get(backups.EARLIER_MAJORS)
    if earlier:
        backup[backups.EARLIER_MAJORS] = earlier
    archive = archive_entry(release, spec, view, previous, now)
    if archive and spec is not None and spec.backup is not None:
        backup["archive"] = archive
        known = (previous.get("backup") or {}).get("baseBackups") or []
        moment = parse_time(now) or datetime.now(UTC)
        taken = base_backups(
            known, backup.get("lastSuccessfulTime"), archive.get("since"), spec.backup.retention, moment
        )
        if taken:
            backup.update(baseBackups=taken, firstRecoverablePoint=taken[0], lastBaseBackup=taken[-1])
    if backup:
        status["backup"] = backup
    if spec is not None and spec.backup:
        healthy, backup_reason, backup_message = backups.health(backup)
        if archive and healthy:  # a failed backup Job is told first; a stalled archive next
            stalled = archive_health(release, archive, parse_time(now) or datetime.now(UTC))
            healthy, backup_reason, backup_message = stalled or (healthy, backup_reason, backup_message)
        conditions.append(make("BackupHealthy", healthy, backup_reason, backup_message))
    return status


def tls_status(tls: Mapping[str, Any], view: PrimaryView) -> dict[str, Any]:
    """status.tls, with how many servers present its certificate (their file is it, and they read it since)."""
    presenting = [
        p.pod
        for p in view.probes.values()
        if isinstance(p, InstanceFacts) and p.certificate == tls.get("fingerprint") and not p.reload_due
    ]
    return {**tls, "presentedBy": sorted(presenting)}


def archive_entry(
    release: str, spec: DatabaseSpec | None, view: PrimaryView, previous: dict[str, Any], now: str
) -> dict[str, Any]:
    """status.backup.archive: from the primary's answer when it gave one, else as last known."""
    if spec is None or spec.backup is None or not spec.backup.continuous or spec.hibernate:
        return {}
    known: dict[str, Any] = (previous.get("backup") or {}).get("archive") or {}
    primary = view.probes.get(recorded_primary(release, view.record))
    if isinstance(primary, InstanceFacts) and not primary.in_recovery:
        return archive_status(primary, known, parse_time(now) or datetime.now(UTC), view.archived)
    return known


def finish_operation(operation: dict[str, Any], settled: bool, problem: Problem | None, now: str) -> dict[str, Any]:
    """An operation in progress ends when the database settles (Running, or Hibernated with no pods) or fails."""
    if operation.get("result") != "InProgress":
        return operation
    if problem is not None:
        return {**operation, "result": "Failed", "finishedAt": now}
    if settled:
        return {**operation, "result": "Succeeded", "finishedAt": now}
    return operation
