"""Planned moves of the primary while it serves: a switchover asked for, one before a scale-down, and the
pods' restart after a template change (replicas first, then one switchover). Pure.

A switchover is recorded like a failover (policy/primary.py carries it out),
with reason Switchover: the old primary is fenced and deleted with its pod's
own grace period, so it shuts down cleanly and its walsenders hand every WAL
record to the connected replicas first; the target then replays all of it
when promoted, and no committed row is lost."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import names
from ..model.instances import InstanceFacts, lsn_text
from ..model.pods import pod_ordinal, tls_secret
from ..model.record import RESTART, SWITCHOVER, PrimaryRecord, recorded_primary
from ..model.statefulset import REVISION_LABEL
from ..model.timestamps import rfc3339
from .actions import RecordPrimary, Restart
from .candidates import Refusal, choose_replica
from .members import Members, Object, deleting, made_after, serving, uid_of


@dataclass(frozen=True)
class Answer:
    """How a switchover request ends: done now (RecordPrimary), nothing to do, or refused."""

    action: RecordPrimary | None
    message: str
    refused: bool = False


def switchover_to(members: Members, pod: str) -> RecordPrimary:
    record = PrimaryRecord(primary=pod, previous=members.primary, reason=SWITCHOVER, decided_at=rfc3339(members.now))
    return RecordPrimary(record)


def requested_switchover(members: Members, target: str) -> Answer:
    """A switchover to TARGET, asked for by the annotation, while the primary serves."""
    primary = members.primary
    if target == primary:
        return Answer(None, f"{target} is the primary already")
    pod = members.pod(target)
    if pod is None:
        pods = ", ".join(sorted(p["metadata"]["name"] for p in members.pods))
        return Answer(None, f"no pod {target} in this database (its pods: {pods})", refused=True)
    facts = members.facts(target)
    if not serving(pod):
        return Answer(None, f"{target} is not ready", refused=True)
    if facts is None or not facts.in_recovery:
        return Answer(None, f"{target} did not answer as a replica", refused=True)
    if facts.receiver != "streaming":
        receiver = facts.receiver or "no WAL receiver"
        return Answer(None, f"{target} is not streaming from the primary ({receiver})", refused=True)
    primary_facts = members.facts(primary)
    if primary_facts is not None:
        behind = primary_facts.wal_lsn - (facts.replay_lsn or facts.wal_lsn)
        if behind > members.settings.max_lag:
            return Answer(
                None,
                f"{target} has {behind} bytes of WAL left to replay, more than maxLagOnFailover "
                f"({members.settings.max_lag} bytes): try again once it caught up",
                refused=True,
            )
    return Answer(switchover_to(members, target), f"switching over from {primary} to {target}")


def scale_down_switchover(members: Members, desired: int) -> Answer | None:
    """The primary's ordinal would be removed by scaling to DESIRED pods: move it below first."""
    primary = members.pod(members.primary)
    if desired < 1 or primary is None or pod_ordinal(primary) < desired:
        return None
    staying = dataclasses.replace(members, pods=tuple(p for p in members.pods if pod_ordinal(p) < desired))
    chosen = choose_replica(staying, exclude=members.primary)
    if isinstance(chosen, Refusal):
        return Answer(None, f"scaling to {desired} waits: the primary {members.primary} stays, {chosen.why}", True)
    return Answer(switchover_to(members, chosen.pod), f"scaling to {desired}: moving the primary to {chosen.pod}")


def next_restart(
    members: Members, revision: str | None, desired: int | None = None, template_tls_secret: str = ""
) -> RecordPrimary | Restart | None:
    """The next pod to restart onto the StatefulSet's revision: one replica at a time (highest ordinal
    first) while every pod serves, then the primary by a switchover to the best replica, or in place
    when no replica can take over (a single instance, or servers that do not answer).

    TEMPLATE_TLS_SECRET: the Secret the new template takes its certificate from. A primary that serves
    another one (none: plain TCP; another: perhaps another CA) restarts first, in place: a restarted replica
    insists on verifying its primary with the new CA and could not follow it, so a switchover to it would
    lose what it missed (the old replicas follow the new primary: they verify nothing yet, or the same CA).

    DESIRED: the StatefulSet's replicas; fewer pods than that is a pod being replaced (a restarted replica gone
    from the cache before its new pod shows), not a single instance: nothing then."""
    if not revision or any(deleting(p) or not serving(p) for p in members.pods):
        return None
    if desired is not None and len(members.pods) < desired:
        return None
    behind = [p for p in members.pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision]
    replicas = [p for p in behind if p["metadata"]["name"] != members.primary]
    primary = members.pod(members.primary)
    moves_ca = template_tls_secret and tls_secret(primary.get("spec") if primary else None) != template_tls_secret
    if moves_ca and primary is not None and primary in behind:
        return restart_in_place(members, primary)
    if replicas:
        last = max(replicas, key=pod_ordinal)
        return Restart(last["metadata"]["name"], uid_of(last))
    if primary is None or primary not in behind:
        return None
    chosen = choose_replica(members, exclude=members.primary)
    if isinstance(chosen, InstanceFacts):
        return switchover_to(members, chosen.pod)
    return restart_in_place(members, primary)


def restart_in_place(members: Members, primary: Object) -> RecordPrimary | Restart:
    """The primary restarts where it is: first the decision, recorded (reason Restart), so the failover
    decisions wait for it instead of taking its absence for a failure; then, the pass after, its pod goes."""
    record = members.record
    decided = record is not None and record.reason == RESTART and record.primary == members.primary
    if decided and record is not None and not made_after(primary, record.decided_at):
        return Restart(members.primary, uid_of(primary))
    return RecordPrimary(PrimaryRecord(primary=members.primary, reason=RESTART, decided_at=rfc3339(members.now)))


def pods_kept(release: str, record: PrimaryRecord | None, replicas: int) -> int | None:
    """How many pods a scale-down to REPLICAS keeps for now: up to the primary's, until a switchover moved
    the primary below (scale_down_switchover); None when the scale-down can go ahead."""
    ordinal = names.pod_ordinal(recorded_primary(release, record))
    return ordinal + 1 if replicas >= 1 and ordinal >= replicas else None


def switchover_short(members: Members, target: str, old: str) -> str | None:
    """Why TARGET, once the old primary stopped, may lack some of its WAL: it received less than the old
    primary's last position the operator read, or than another replica. None: it has it all (a clean shutdown's
    walsenders hand every record to the streaming replicas before the server stops)."""
    facts = members.facts(target)
    if facts is None:
        return None  # not asked: the promotion waits for its answer anyway
    sighting = members.sighting
    if sighting is not None and sighting.pod == old and facts.wal_lsn < sighting.lsn:
        return f"it received {lsn_text(facts.wal_lsn)}, less than {old}'s last known position {lsn_text(sighting.lsn)}"
    ahead = [
        f
        for f in members.probes.values()
        if isinstance(f, InstanceFacts) and f.in_recovery and f.pod != target and f.wal_lsn > facts.wal_lsn
    ]
    if ahead:
        best = max(ahead, key=lambda f: f.wal_lsn)
        return f"it received {lsn_text(facts.wal_lsn)}, less than {best.pod} ({lsn_text(best.wal_lsn)})"
    return None
