"""One database's topology step as it goes: its servers, its pods as the step left them, and what it did.

reconcile/topology.py drives it; this carries out each action the policies ask
for (policy/actions.py) and keeps the pass's own copy of the pods up to date."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import names
from ..cluster.failures import API_FAILURES, conflict, failure_detail
from ..desired.lease import lease_body
from ..desired.record import record_configmap
from ..instances import commands
from ..model.instances import Probe
from ..model.lease import LeaseFacts, LeaseSighting, held_for, parse_lease, seen, still_for, written
from ..model.pods import role_label
from ..model.record import FAILOVER, REBUILT, SWITCHOVER, PrimaryRecord, recorded_primary
from ..model.sighting import Sighting, latest, sighting_of
from ..model.spec import FAILOVER_DELAY_SECONDS, MAX_LAG_ON_FAILOVER, DatabaseSpec, lag_limit
from ..model.timestamps import parse_time, rfc3339
from ..policy.actions import (
    STARTING,
    Action,
    CreateSlot,
    DropSlot,
    Fence,
    KeepLease,
    Label,
    Plan,
    Promote,
    RecordPrimary,
    Repoint,
    Restart,
    UseSlot,
)
from ..policy.members import HaSettings, Members
from ..status.warnings import Event
from ..telemetry import metrics
from .runtime import Runtime
from .servers import Servers

log = logging.getLogger(__name__)


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
    reads_position: bool = False  # the primary's position is to be read between passes (topology.read_position)
    archived: dict[int, int] = field(default_factory=dict)  # timeline -> the WAL the archive confirmed on it


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
        self.watch = runtime.watches.of((namespace, name))
        self.lease: LeaseSighting | None = None  # the primary lease as this pass knows it
        self.lease_members: tuple[str, ...] = ()  # the pods it names ((): no lease kept this pass)

    async def read_lease(self, members: tuple[str, ...]) -> None:
        """Read the primary lease, for a database of MEMBERS (two pods or more). Unreadable now: no lease is
        kept in this pass and no fenced primary counts as stopped by it."""
        if len(members) < 2:
            return
        try:
            body = await self.api.read_lease(self.namespace, names.primary_record(self.name))
        except API_FAILURES as error:
            log.warning("%s/%s: reading the primary lease: %s", self.namespace, self.name, failure_detail(error))
            return
        self.lease_members = members
        self.lease = self.watch.lease = seen(self.watch.lease, parse_lease(body), datetime.now(UTC))

    # ------------------------------------------------------------ acting

    async def act(self, action: Action) -> bool:
        """Carry one action out; False when a server refused (the rest of this pass's actions wait)."""
        namespace, release = self.namespace, self.name
        if isinstance(action, RecordPrimary):
            await self.record(action.record)
        elif isinstance(action, KeepLease):
            await self.keep_lease(action)
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
            if action.why:
                self.report.events.append(("Warning", "ReplicaDiverged", action.why))
            else:
                self.report.events.append(
                    ("Normal", "Restarting", f"restarting {action.pod} onto the current template")
                )
        elif isinstance(action, Promote):
            return await self.promote(action.pod, action.why)
        elif isinstance(action, Repoint):
            return await self.servers.command(
                self.pods, action.pod, "point it at the primary", commands.repoint, action.conninfo
            )
        elif isinstance(action, CreateSlot):
            return await self.servers.command(self.pods, action.pod, "make a slot", commands.create_slot, action.slot)
        elif isinstance(action, DropSlot):
            return await self.servers.command(self.pods, action.pod, "drop a slot", commands.drop_slot, action.slot)
        elif isinstance(action, UseSlot):
            return await self.servers.command(self.pods, action.pod, "use its slot", commands.use_slot, action.slot)
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
        elif before is not None and before.reason == SWITCHOVER and record.primary == before.previous:
            self.report.events.append(("Warning", "SwitchoverAborted", self.report.plan.message))
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

    async def keep_lease(self, action: KeepLease) -> None:
        """Write the lease over the one this pass read; renewed since (the API refuses it, 409), read again and
        written once more. A new holder: the old one stops its server once it sees it, or cannot renew."""
        known = self.lease.facts if self.lease is not None else None
        now = datetime.now(UTC)
        try:
            version = await self.write_lease(action, known, now)
        except API_FAILURES as error:
            if not conflict(error):
                raise
            await self.read_lease(self.lease_members)
            known = self.lease.facts if self.lease is not None else None
            version = await self.write_lease(action, known, now)
        self.lease = self.watch.lease = written(self.lease, LeaseFacts(action.holder, action.members, version), now)
        if known is None or known.holder != action.holder:
            log.info("%s/%s: the primary lease names %s", self.namespace, self.name, action.holder)

    async def write_lease(self, action: KeepLease, known: LeaseFacts | None, now: datetime) -> str:
        version = known.resource_version if known else ""
        return await self.api.write_lease(
            lease_body(self.namespace, self.name, action.holder, action.members, now, version)
        )

    async def promote(self, pod: str, why: str = "") -> bool:
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
            self.report.events.append(("Normal", "Promoted", f"{pod} is the primary{took}{f': {why}' if why else ''}"))
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
            lease=self.lease.facts if self.lease is not None else None,
            lease_held=held_for(self.lease, now),
            lease_still=still_for(self.lease, now),
            lease_renewed=self.lease is not None and self.lease.renewed,
            lease_members=self.lease_members,
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
