"""The status of the primary and the replication around it, from what the servers said. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import names
from ..model.instances import InstanceFacts, KeptData, Probe, Unreachable, lsn_text
from ..model.pods import role_label
from ..model.record import FAILOVER, SWITCHOVER, PrimaryRecord, recorded_primary
from ..policy.actions import SERVING, STARTING, Plan
from ..policy.lagging import just_promoted, settling, why_behind
from ..policy.members import serving

Object = dict[str, Any]


@dataclass(frozen=True)
class PrimaryView:
    """What the pass learnt of the primary: the record, each server's answer, and where the plan stood."""

    record: PrimaryRecord | None = None
    probes: Mapping[str, Probe] = field(default_factory=dict)
    plan: Plan = field(default_factory=lambda: Plan((), STARTING))
    note: str = ""  # a planned move that waits
    archived: Mapping[int, int] = field(default_factory=dict)  # timeline -> the WAL the archive confirmed on it


def confirmed_primary(release: str, view: PrimaryView, pods: list[Object]) -> str | None:
    """The recorded primary, when it serves and its server (if it answered) is not in recovery."""
    target = recorded_primary(release, view.record)
    pod = next((p for p in pods if p["metadata"]["name"] == target), None)
    facts = view.probes.get(target)
    if serving(pod) and not (isinstance(facts, InstanceFacts) and facts.in_recovery):
        return target
    return None


def instances(
    release: str, view: PrimaryView, pods: list[Object], previous: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One entry per pod, as its server answered: role, timeline, WAL position, a replica's replay lag.
    A server that does not answer keeps its last known position and timeline (from PREVIOUS, the last
    status): a failover measures the replicas' lag against the primary's. Empty when no server answered
    (simulated pods, or none running)."""
    if not any(isinstance(p, InstanceFacts) for p in view.probes.values()):
        return []
    known = {entry.get("name"): entry for entry in previous or []}
    primary = view.probes.get(recorded_primary(release, view.record))
    head = primary.wal_lsn if isinstance(primary, InstanceFacts) and not primary.in_recovery else None
    entries = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name = pod["metadata"]["name"]
        probe = view.probes.get(name)
        entry: dict[str, Any] = {"name": name, "ready": serving(pod)}
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            entry["node"] = node
        if isinstance(probe, InstanceFacts):
            entry["role"] = names.REPLICA if probe.in_recovery else names.PRIMARY
            if probe.timeline is not None:
                entry["timeline"] = probe.timeline
            entry["lsn"] = lsn_text(probe.wal_lsn)
            if probe.version:
                entry["version"] = probe.version
            if probe.data_checksums is not None:
                entry["dataChecksums"] = probe.data_checksums
            if probe.checksum_failures:
                entry["checksumFailures"] = probe.checksum_failures
            if probe.in_recovery:
                entry["state"] = probe.receiver or "not streaming"
                if head is not None:
                    entry["lagBytes"] = max(0, head - (probe.replay_lsn or probe.wal_lsn))
            if probe.kept:
                entry["keptData"] = [kept_entry(kept) for kept in probe.kept]
        else:
            entry["role"] = role_label(pod) or "unknown"
            entry["state"] = f"no answer: {probe.error}" if isinstance(probe, Unreachable) else "not answering"
            last = known.get(name) or {}
            entry.update({key: last[key] for key in ("timeline", "lsn", "keptData", "checksumFailures") if key in last})
        entries.append(entry)
    return entries


def replicas_behind(release: str, view: PrimaryView, pods: list[Object], max_lag: int, now: datetime) -> str | None:
    """The replicas a failover could not promote while the primary serves, and why (policy/lagging.py). None:
    none. The words stay the same while the same replicas are behind for the same reasons (one Warning; the
    lag is in status.instances)."""
    primary = view.probes.get(recorded_primary(release, view.record))
    if not isinstance(primary, InstanceFacts) or primary.in_recovery:
        return None
    if just_promoted(view.record, now):
        return None
    behind: list[str] = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        facts = view.probes.get(pod["metadata"]["name"])
        if not isinstance(facts, InstanceFacts) or not facts.in_recovery or settling(pod, now):
            continue
        why = why_behind(primary, facts, max_lag)
        if why is not None:
            behind.append(why)
    if not behind:
        return None
    return "; ".join(behind) + ": a failover would not promote them"


KEPT_FIELDS = ("reason", "keptAt", "timeline", "divergedAt", "checkpoint", "walEnd", "major")


def kept_entry(kept: KeptData) -> dict[str, Any]:
    """status.instances[].keptData[]: where the data is, why, and the WAL range it holds past the fork."""
    entry: dict[str, Any] = {"directory": kept.directory}
    entry.update({key: kept.facts[key] for key in KEPT_FIELDS if key in kept.facts})
    if kept.facts.get("bytes", "").isdigit():
        entry["bytes"] = int(kept.facts["bytes"])
    return entry


def last_moves(record: PrimaryRecord | None, previous: dict[str, Any]) -> dict[str, Any]:
    """lastFailover and lastSwitchover: the record's move, and the other kind's as the last status had it."""
    moves = {key: previous[key] for key in ("lastFailover", "lastSwitchover") if previous.get(key)}
    if record is not None and record.reason in (FAILOVER, SWITCHOVER):
        move = {"from": record.previous, "to": record.primary, "decidedAt": record.decided_at}
        if record.promoted_at:
            move["promotedAt"] = record.promoted_at
        moves["lastFailover" if record.reason == FAILOVER else "lastSwitchover"] = move
    return moves


def primary_status(release: str, view: PrimaryView, pods: list[Object], previous: dict[str, Any]) -> dict[str, Any]:
    """status.primary (the last pod confirmed serving as primary) and its node, targetPrimary (the record), timeline,
    version (what the primary's server runs, as last known), instances, lastFailover and lastSwitchover."""
    fields: dict[str, Any] = {"targetPrimary": recorded_primary(release, view.record)}
    if pods:
        primary = confirmed_primary(release, view, pods) or previous.get("primary")
        if primary:
            fields["primary"] = primary
            node = next(((p.get("spec") or {}).get("nodeName") for p in pods if p["metadata"]["name"] == primary), None)
            if node or previous.get("primaryNode"):
                fields["primaryNode"] = node or previous["primaryNode"]
        facts = view.probes.get(fields["targetPrimary"])
        if isinstance(facts, InstanceFacts) and facts.timeline is not None:
            fields["timeline"] = facts.timeline
        running = facts.version if isinstance(facts, InstanceFacts) else previous.get("version")
        if running:
            fields["version"] = running
        found = instances(release, view, pods, previous.get("instances"))
        if found:
            fields["instances"] = found
    fields.update(last_moves(view.record, previous))
    return fields


def routing_gap(release: str, primary: str, pods: list[Object], routes: Mapping[str, tuple[str, ...]]) -> str | None:
    """What the Services do not route to yet, when every pod is ready: the read-write one to the primary
    alone, the read-only one to exactly the ready replicas. A client that connects right after Ready
    must land where it should."""
    read_write = names.read_write_service(release)
    if routes.get(read_write, ()) != (primary,):
        return f"waiting for Service {read_write} to route to {primary}"
    replicas = tuple(
        sorted(
            p["metadata"]["name"]
            for p in pods
            if serving(p)
            and p["metadata"]["name"] != primary
            and role_label(p) not in (names.PRIMARY, names.FENCED, names.LAGGING)
        )
    )
    read_only = names.read_only_service(release)
    if routes.get(read_only, ()) != replicas:
        return f"waiting for Service {read_only} to route to {', '.join(replicas) or 'no pod'}"
    return None


def failover_condition_facts(view: PrimaryView) -> tuple[bool, str, str]:
    """The Failover condition: True while the primary moves (reason FailingOver or SwitchingOver); False
    with reason Stable while it serves or starts, or with why a failover waits or cannot happen."""
    state = view.plan.state
    moving = state in ("FailingOver", "SwitchingOver")
    if state in (SERVING, STARTING):
        return False, "Stable", view.note or "the primary is not moving"
    return moving, state, view.plan.message
