"""The primary: kept where the record says, moved when it stops serving or when asked.

Each pass asks the servers what they are (instances/probe.py), lets the
policies decide (policy/primary.py: failover and promotion; policy/maintenance.py:
a switchover asked for, one before a scale-down, the pods' restarts), carries
the actions out in order and, after a decision or a promotion, looks again in
the same pass, so a failover does not wait for the next wake-up."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail
from ..desired.record import record_configmap
from ..instances import commands
from ..model.instances import Probe
from ..model.observation import Observation
from ..model.pods import role_label, tls_secret
from ..model.record import FAILOVER, REBUILT, SWITCHOVER, PrimaryRecord, parse_record, recorded_primary
from ..model.sighting import Sighting, latest, sighting_of
from ..model.spec import FAILOVER_DELAY_SECONDS, MAX_LAG_ON_FAILOVER, DatabaseSpec, lag_limit
from ..model.statefulset import update_revision, update_strategy
from ..model.timestamps import parse_time, rfc3339
from ..policy import maintenance
from ..policy.actions import (
    SERVING,
    STARTING,
    WAITING,
    Action,
    Fence,
    Label,
    Plan,
    Promote,
    RecordPrimary,
    Repoint,
    Restart,
)
from ..policy.members import HaSettings, Members, deleting
from ..policy.primary import plan
from ..status.warnings import Event
from ..telemetry import metrics
from .runtime import Runtime
from .servers import Servers

log = logging.getLogger(__name__)
ROUNDS = 4  # looks in one pass: decide, fence, promote, then label and repoint
RETRY_SECONDS = 2.0  # a server that refused a command: the next pass tries again
# While replicas stream asynchronously, the primary's position is read at least this often: a failover judges
# the replicas' lag against it (policy/candidates.SIGHTING_MAX_AGE_SECONDS), as Patroni's leader publishes its
# own every loop_wait (10 s).
SIGHTING_INTERVAL_SECONDS = 10.0
# A failover about to be recorded asks the old primary once more, readiness aside; a hung one is given this long.
CONFIRM_SECONDS = 1.0


@dataclass
class Topology:
    """What the pass found and did: the record, each server's answer, the plan it ended on."""

    record: PrimaryRecord | None = None
    probes: dict[str, Probe] = field(default_factory=dict)
    plan: Plan = field(default_factory=lambda: Plan((), STARTING))
    events: list[Event] = field(default_factory=list)
    recheck: float | None = None  # seconds until the next pass should look again
    note: str = ""  # a planned move that waits (a scale-down), for the status message
    failed: bool = False  # the API refused a step: the rest of the pass goes on, the daemon retries soon


def settings_of(spec: DatabaseSpec | None) -> HaSettings:
    """The spec's failover settings; the defaults when the spec does not parse (a failover still happens)."""
    if spec is None:
        return HaSettings(FAILOVER_DELAY_SECONDS, lag_limit(MAX_LAG_ON_FAILOVER) or 0, False)
    return HaSettings(float(spec.failover_delay), lag_limit(spec.max_lag_on_failover) or 0, spec.synchronous)


def left_ready_at(previous: dict[str, Any]) -> datetime | None:
    ready = next((c for c in previous.get("conditions") or [] if c.get("type") == "Ready"), None)
    return parse_time(ready.get("lastTransitionTime")) if ready and ready.get("status") != "True" else None


class Pass:
    """One database's topology step: its servers, its pods as this pass left them, and what it did."""

    def __init__(self, namespace: str, name: str, spec: DatabaseSpec | None, runtime: Runtime):
        self.namespace, self.name = namespace, name
        self.api = runtime.api
        self.servers = Servers(namespace, name, spec, runtime)
        self.report = Topology()
        self.pods: list[dict[str, Any]] = []

    # ------------------------------------------------------------ acting

    async def act(self, action: Action) -> bool:
        """Carry one action out; False when a server refused (the rest of this pass's actions wait)."""
        namespace, release = self.namespace, self.name
        if isinstance(action, RecordPrimary):
            await self.record(action.record)
        elif isinstance(action, Label):
            await self.api.label_pod(namespace, action.pod, names.ROLE_LABEL, action.role)
            self.relabel(action.pod, action.role)
        elif isinstance(action, Fence):
            await self.api.label_pod(namespace, action.pod, names.ROLE_LABEL, names.FENCED)
            await self.api.delete_pod(namespace, action.pod, action.uid, action.grace)
            self.relabel(action.pod, names.FENCED, deleted=True)
            log.info("%s/%s: fenced %s (out of both Services, deleted to stop)", namespace, release, action.pod)
        elif isinstance(action, Restart):
            await self.api.delete_pod(namespace, action.pod, action.uid, None)
            restarted = self.pod(action.pod)
            self.relabel(action.pod, (role_label(restarted) if restarted else None) or names.REPLICA, deleted=True)
            self.report.events.append(("Normal", "Restarting", f"restarting {action.pod} onto the current template"))
        elif isinstance(action, Promote):
            return await self.promote(action.pod)
        elif isinstance(action, Repoint):
            return await self.servers.command(
                self.pods, action.pod, "point it at the primary", commands.repoint, action.conninfo
            )
        return True

    async def record(self, record: PrimaryRecord) -> None:
        """Write the decision; an Event when it is a new move, not the promotion's time stamp."""
        before = self.report.record
        # Written over the record this pass read (its resourceVersion): a newer one makes the API refuse it.
        record = dataclasses.replace(record, resource_version=before.resource_version if before else "")
        version = await self.api.write_record(record_configmap(self.namespace, self.name, record))
        self.report.record = dataclasses.replace(record, resource_version=version)
        if before is not None and (before.primary, before.decided_at) == (record.primary, record.decided_at):
            return
        metrics.PRIMARY_CHANGES.labels(record.reason, "started").inc()
        if record.reason == FAILOVER:
            message = f"{self.report.plan.message or 'the primary stopped serving'}; recorded {record.primary}"
            self.report.events.append(("Warning", "FailoverStarted", message))
        elif record.reason == REBUILT:
            self.report.events.append(("Warning", "PrimaryRecordRebuilt", self.report.plan.message))
        else:
            message = f"moving the primary from {record.previous} to {record.primary}"
            self.report.events.append(("Normal", "SwitchoverStarted", message))
        log.info(
            "%s/%s: %s: %s is the primary now (was %s)",
            self.namespace,
            self.name,
            record.reason,
            record.primary,
            record.previous,
        )

    async def promote(self, pod: str) -> bool:
        promoted = await self.servers.command(self.pods, pod, "promote it", commands.promote)
        if not promoted:
            return False
        record = self.report.record
        kind = record.reason if record is not None and record.reason else FAILOVER
        metrics.PRIMARY_CHANGES.labels(kind, "completed").inc()
        took = ""
        decided = parse_time(record.decided_at) if record is not None else None
        if decided is not None:
            took = f" {(datetime.now(UTC) - decided).total_seconds():.1f}s after the decision"
        if kind == SWITCHOVER:
            self.report.events.append(("Normal", "SwitchoverCompleted", f"{pod} is the primary{took}"))
        else:
            self.report.events.append(("Normal", "Promoted", f"{pod} is the primary{took}"))
        return True

    def pod(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.pods if p["metadata"]["name"] == name), None)

    def members(
        self,
        settings: HaSettings,
        previous: dict[str, Any],
        sighting: Sighting | None,
        watching_since: datetime | None,
        full: frozenset[str],
        was_full: frozenset[str],
    ) -> Members:
        """The database as the decisions see it now, with the primary's answer of this pass, if it gave one."""
        now, primary = datetime.now(UTC), recorded_primary(self.name, self.report.record)
        return Members(
            namespace=self.namespace,
            release=self.name,
            pods=tuple(self.pods),
            record=self.report.record,
            probes=dict(self.report.probes),
            settings=settings,
            now=now,
            served=previous.get("primary") == primary,
            down_since=left_ready_at(previous),
            sighting=latest(sighting, sighting_of(primary, self.report.probes, now)),
            watching_since=watching_since,
            last_primary=previous.get("primary"),
            full=full,
            was_full=was_full,
        )

    def relabel(self, name: str, role: str, deleted: bool = False) -> None:
        """What this pass did to a pod, in its own copy: the next look in the pass builds on it."""
        found = self.pod(name)
        if found is None:
            return
        metadata = {**found["metadata"], "labels": {**(found["metadata"].get("labels") or {}), names.ROLE_LABEL: role}}
        if deleted:
            metadata["deletionTimestamp"] = rfc3339(datetime.now(UTC))
        self.pods = [{**p, "metadata": metadata} if p is found else p for p in self.pods]


async def keep_primary(
    namespace: str,
    name: str,
    spec: DatabaseSpec | None,
    annotations: dict[str, str],
    previous: dict[str, Any],
    observed: Observation,
    runtime: Runtime,
    *,
    still: bool = False,
    full: frozenset[str] = frozenset(),
    was_full: frozenset[str] = frozenset(),
) -> Topology:
    """Ask, decide, act, look again: at most ROUNDS times in one pass. STILL: ask only (the pods stop on
    purpose: a major upgrade). FULL: the pods whose data volume is full, never promoted (nor failed over
    from); WAS_FULL: those the last status showed full (a primary down among them is restarted)."""
    step = Pass(namespace, name, spec, runtime)
    step.pods = list(observed.pods)
    step.report.record = parse_record(observed.record)
    if not step.pods:
        return step.report
    if still:
        step.report.probes = await step.servers.ask(step.pods)
        return step.report
    settings = settings_of(spec)
    watch = runtime.watches.of((namespace, name))
    for _ in range(ROUNDS):
        step.report.probes = await step.servers.ask(step.pods)
        members = step.members(settings, previous, watch.sighting, watch.watching_since, full, was_full)
        watch.sighting = members.sighting
        decided = plan(members)
        if failover_on_an_unasked_primary(decided, members):
            # The decision stands on the pod's readiness: ask the primary's server itself first.
            answer = await step.servers.ask_one(step.pods, members.primary, CONFIRM_SECONDS)
            if answer is not None:
                step.report.probes[members.primary] = answer
                members = dataclasses.replace(members, probes=dict(step.report.probes))
                decided = plan(members)
        if decided.state == SERVING and not decided.actions:
            decided = await planned_move(step, members, annotations, observed, spec)
        watch.watching_since = (watch.watching_since or members.now) if decided.state == WAITING else None
        step.report.plan = decided
        step.report.recheck = decided.recheck
        looks_again = False
        for action in decided.actions:
            try:
                done = await step.act(action)
            except API_FAILURES as error:
                # Helm and the status still get their turn; the daemon tries again soon.
                log.warning("%s/%s: %s: %s", namespace, name, type(action).__name__, failure_detail(error))
                step.report.failed = True
                return step.report
            if not done:
                step.report.recheck = RETRY_SECONDS
                return step.report
            looks_again = looks_again or isinstance(action, RecordPrimary | Promote)
        if not looks_again:
            break
    reads_position = step.report.plan.state == SERVING and watch.sighting is not None and len(step.pods) > 1
    if reads_position and not settings.synchronous:  # a fresh position for the lag of a failover
        step.report.recheck = min(step.report.recheck or SIGHTING_INTERVAL_SECONDS, SIGHTING_INTERVAL_SECONDS)
    return step.report


def failover_on_an_unasked_primary(decided: Plan, members: Members) -> bool:
    """DECIDED records a failover from a primary whose server this pass did not ask (its pod is not ready)."""
    records = [a.record for a in decided.actions if isinstance(a, RecordPrimary)]
    if not records or records[0].reason != FAILOVER or members.primary in members.probes:
        return False
    pod = members.pod(members.primary)
    return pod is not None and not deleting(pod) and bool((pod.get("status") or {}).get("podIP"))


async def planned_move(
    step: Pass, members: Members, annotations: dict[str, str], observed: Observation, spec: DatabaseSpec | None
) -> Plan:
    """While the primary serves: a switchover asked for, then one a scale-down needs, then the next restart."""
    requested = annotations.get(names.SWITCHOVER_ANNOTATION)
    if requested:
        answer = maintenance.requested_switchover(members, requested)
        await step.api.remove_annotation(step.namespace, step.name, names.SWITCHOVER_ANNOTATION, requested)
        if answer.refused:
            step.report.events.append(("Warning", "SwitchoverRefused", f"switchover to {requested}: {answer.message}"))
        elif answer.action is None:
            step.report.events.append(("Normal", "SwitchoverNotNeeded", answer.message))
        if answer.action is not None:
            return Plan((answer.action,), SERVING, answer.message)
    if spec is not None and not spec.hibernate:
        moved = maintenance.scale_down_switchover(members, spec.replicas)
        if moved is not None:
            if moved.action is not None:
                return Plan((moved.action,), SERVING, moved.message)
            step.report.note = moved.message
            return Plan((), SERVING, moved.message)
    if update_strategy(observed.statefulset) == "OnDelete":
        desired = ((observed.statefulset or {}).get("spec") or {}).get("replicas")
        template = (((observed.statefulset or {}).get("spec") or {}).get("template") or {}).get("spec")
        revision = update_revision(observed.statefulset)
        restart = maintenance.next_restart(members, revision, desired, tls_secret(template))
        if restart is not None:
            return Plan((restart,), SERVING, "restarting the pods onto the current template")
    return Plan((), SERVING)
