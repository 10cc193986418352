"""Which pod is the primary, and what to do when it stops serving: failover and promotion. Pure.

Every pass looks at the pods, the record (model/record.py) and what each server
said (model/instances.py), and answers with the next actions, in order;
reconcile/topology.py carries them out and looks again. Nothing here
remembers: after an operator restart the same facts give the same answer, so a
failover cut short goes on where it stood. The sequence, as CloudNativePG's:

1. the recorded primary has not served for failoverDelay: pick the replica with
   the most WAL (received, then replayed, then name), within maxLagOnFailover,
   and record it as the primary (the decision, written before anything acts);
2. fence every other pod that may still act as primary: labelled `fenced` (out
   of both Services at once) and deleted, so it never takes a write again and
   comes back as a replica (pg_rewind in its init container);
3. once those are gone, promote the recorded one (pg_promote);
4. label it primary, point the other replicas at it (primary_conninfo and a
   reload: no restart, no clone).
"""

from __future__ import annotations

import dataclasses

from .. import names
from ..model.instances import InstanceFacts, Unreachable, with_value
from ..model.lease import STILL_SECONDS
from ..model.pods import role_label
from ..model.record import FAILOVER, RESTART, SWITCHOVER, PrimaryRecord
from ..model.timestamps import parse_time, rfc3339
from .actions import (
    FAILING_OVER,
    SERVING,
    STARTING,
    STUCK,
    SWITCHING_OVER,
    WAITING,
    Action,
    Fence,
    KeepLease,
    Label,
    Plan,
    Promote,
    RecordPrimary,
    Repoint,
    Restart,
)
from .candidates import Refusal, choice_figures, choose_replica
from .lagging import rejoin_restarts, replica_role
from .lost_record import rebuilt_record
from .maintenance import restart_in_place, switchover_short
from .members import (
    Members,
    Object,
    answers_as_primary,
    deleting,
    made_after,
    outage_began,
    primary_serves,
    probe_interrupted,
    recovering_in_place,
    starting_since,
    stopped,
    uid_of,
    why_not_serving,
)
from .slots import slot_actions

# A failing primary is hung or gone: its pod gets this long to stop before it is killed.
FAILOVER_GRACE_SECONDS = 1
RECHECK_SECONDS = 1.0  # while waiting for a fenced pod to go: its deletion also wakes the database
# A primary whose pod is coming up again by itself gets this long to serve before a failover is decided.
STARTUP_GRACE_SECONDS = 30.0
# A primary whose postmaster restarts its backends and replays WAL in place (crash recovery) gets this long.
CRASH_RECOVERY_GRACE_SECONDS = 60.0
# A primary the operator restarts in place gets this long to come back (its pod's grace period, 120 s, and a
# start) before its absence counts as a failure.
RESTART_GRACE_SECONDS = 150.0


def plan(members: Members) -> Plan:
    """The next actions for the database's primary, in order. The primary lease follows the record first,
    whatever else happens: a primary whose server waits for the lease (a switchover aborted, a restart) would
    otherwise wait for ever, and one the record no longer names stops once the lease says so."""
    decided = decide(members)
    keep = lease_kept(members, members.primary)
    if not keep or any(isinstance(action, RecordPrimary) for action in decided.actions):
        return decided  # a new record: the next look names its primary
    return dataclasses.replace(decided, actions=(*keep, *decided.actions))


def decide(members: Members) -> Plan:
    if members.record is None:
        rebuilt = rebuilt_record(members)
        if rebuilt is not None:
            message = f"the record of the primary was missing: written again naming {rebuilt.primary}"
            return Plan((RecordPrimary(rebuilt),), SERVING, message)
    target = members.primary
    facts = members.facts(target)
    if facts is not None and facts.in_recovery:
        return promotion(members)
    if primary_serves(members):
        return steady(members)
    return primary_down(members)


def steady(members: Members) -> Plan:
    """The recorded primary serves: labels follow it, any other primary is fenced, replicas follow it."""
    target = members.primary
    actions: list[Action] = []
    pod = members.pod(target)
    if pod is not None and role_label(pod) != names.PRIMARY:
        actions.append(Label(target, names.PRIMARY))
    host = names.pod_host(members.namespace, members.release, target)
    repoints: list[Action] = []
    for other in members.others():
        name, facts = other["metadata"]["name"], members.facts(other["metadata"]["name"])
        if deleting(other):
            continue
        acts_as_primary = facts is not None and not facts.in_recovery
        if acts_as_primary or role_label(other) in (names.PRIMARY, names.FENCED):
            # A former primary back on its old timeline, or fenced and never restarted.
            actions.append(Fence(name, uid_of(other), FAILOVER_GRACE_SECONDS))
            continue
        role = replica_role(members, other, facts)
        if role_label(other) != role:
            actions.append(Label(name, role))
        if facts is not None and facts.upstream is not None and facts.upstream != host:
            repoints.append(Repoint(name, with_value(facts.conninfo, "host", host)))
    # The slots first: a replica pointed at a new primary streams through its slot there.
    actions += slot_actions(members) + repoints + rejoin_restarts(members)
    record, facts = members.record, members.facts(target)
    if record is not None and not record.promoted_at and facts is not None:
        actions.append(RecordPrimary(dataclasses.replace(record, promoted_at=rfc3339(members.now))))
    return Plan(tuple(actions), SERVING, recheck=silence_recheck(members))


def silence_recheck(members: Members) -> float | None:
    """Seconds until a primary that did not answer this pass, and holds a lease that has not changed since, may be
    silent (members.silent) unless it renews meanwhile, or its replicas' receivers give up on it; None when it
    answered or the lease moves."""
    target, lease = members.primary, members.lease
    if not isinstance(members.probes.get(target), Unreachable) or lease is None or lease.holder != target:
        return None
    if not members.lease_renewed:
        return None  # never seen renewed (a simulated pod's, say): its stillness says nothing
    return max(RECHECK_SECONDS, STILL_SECONDS - members.lease_still + 0.5)


def lease_kept(members: Members, holder: str) -> list[Action]:
    """The primary lease names HOLDER and the database's pods; nothing for a database of one pod."""
    wanted, lease = members.lease_members, members.lease
    if len(wanted) < 2 or (lease is not None and (lease.holder, lease.members) == (holder, wanted)):
        return []
    return [KeepLease(holder, wanted)]


def detached(members: Members, target: str) -> list[Action]:
    """A failover's standbys, pointed at TARGET (itself included) instead of the old primary, before the wait: a
    standby that follows the old primary would vouch for it while the API server is out of its reach (the
    chart's lease.pl), and the old primary would go on as primary."""
    host = names.pod_host(members.namespace, members.release, target)
    actions: list[Action] = []
    for pod in members.pods:
        name, facts = pod["metadata"]["name"], members.facts(pod["metadata"]["name"])
        if facts is not None and facts.in_recovery and facts.upstream not in (None, host) and not deleting(pod):
            actions.append(Repoint(name, with_value(facts.conninfo, "host", host)))
    return actions


def restart_over(members: Members, pod: Object | None) -> bool:
    """The pod made for a recorded restart answered as the primary since: an outage now is no restart's."""
    record, sighting = members.record, members.sighting
    if pod is None or record is None or sighting is None or sighting.pod != record.primary:
        return False
    created = parse_time(pod["metadata"].get("creationTimestamp"))
    return made_after(pod, record.decided_at) and created is not None and sighting.at > created


def primary_down(members: Members) -> Plan:
    """The recorded primary does not serve: wait out failoverDelay, then record the best replica."""
    target = members.primary
    pod = members.pod(target)
    why = why_not_serving(pod, target, members)
    if not members.served:
        return Plan((), STARTING, f"waiting for the primary {target} to serve: {why}")
    if target in members.full:
        # CloudNativePG's rule too: a replica has the same data to write, and the primary serves again,
        # with nothing lost, once its volume grows.
        message = f"the primary {why}, and its data volume is full: it serves again once the volume grows"
        return Plan((), STUCK, message, RECHECK_SECONDS * 5)
    if target in members.was_full and pod is not None and not deleting(pod):
        # Its volume just grew: a restart now spares it the crash loop's back-off (up to 5 minutes).
        message = f"the primary {target}'s data volume grew: restarting it in place"
        return Plan((restart_in_place(members, pod),), STARTING, message, RECHECK_SECONDS * 2)
    record = members.record
    decided = parse_time(record.decided_at) if record is not None and record.reason == RESTART else None
    restarting = decided is not None and (members.now - decided).total_seconds() < RESTART_GRACE_SECONDS
    if restarting and not restart_over(members, pod):
        assert record is not None
        if pod is not None and not deleting(pod) and not made_after(pod, record.decided_at):
            # Recorded, not carried out yet: the pod made before the decision goes (the StatefulSet makes it again).
            restart = Restart(target, uid_of(pod))
            return Plan((restart,), STARTING, f"the primary {target} restarts", RECHECK_SECONDS * 2)
        return Plan((), STARTING, f"the primary {target} restarts onto the current pod template", RECHECK_SECONDS * 2)
    starting = starting_since(pod)
    if starting is not None and (members.now - starting).total_seconds() < STARTUP_GRACE_SECONDS:
        # Its pod came back by itself (a restart of the whole database, of its node, of its container):
        # it serves again in seconds, with no rewind and no loss. A pod that cannot come back is no such pod.
        left = STARTUP_GRACE_SECONDS - (members.now - starting).total_seconds()
        return Plan((), STARTING, f"the primary {target} is starting", min(left, RECHECK_SECONDS * 5))
    if answers_as_primary(members, target):
        # Readiness is the kubelet's word, or the node controller's for a node it cannot hear: the server's own
        # answer, asked now, wins. Failing over from it would make two primaries and may lose its commits.
        message = f"the primary {why}, but its server answers as the primary: it stays the primary"
        return Plan((), WAITING, message, RECHECK_SECONDS * 2)
    since = outage_began(members, target) or members.down_since or members.now
    waited = (members.now - since).total_seconds()
    if recovering_in_place(members.probes.get(target)) and waited < CRASH_RECOVERY_GRACE_SECONDS:
        # Its postmaster lives and replays its own WAL (a backend was killed, the OOM killer): it serves again
        # with every commit, where a failover now could lose the last ones.
        message = f"the primary {target} recovers from a crash in place: waiting for it"
        return Plan((), WAITING, message, RECHECK_SECONDS * 2)
    if probe_interrupted(pod) and waited < STARTUP_GRACE_SECONDS:
        # Its probe container restarted (the kubelet restarts it alone): the server itself may be fine.
        message = f"the primary {target}'s probe container restarts: waiting for its answer"
        return Plan((), WAITING, message, min(STARTUP_GRACE_SECONDS - waited, RECHECK_SECONDS * 5))
    chosen = choose_replica(members, exclude=target)
    if isinstance(chosen, Refusal):
        return Plan((), STUCK, f"the primary {why} and no replica can take over: {chosen.why}", RECHECK_SECONDS * 5)
    # failoverDelay counts from when this operator first saw a replica able to take over, too: a stretch in
    # which nothing could be seen (every pod of an Unknown node unready) is no evidence the primary is gone.
    watched = (members.now - (members.watching_since or members.now)).total_seconds()
    waited = min(waited, watched)
    delay = members.settings.failover_delay
    if waited < delay:
        message = f"the primary {why}; a replica takes over after failoverDelay ({delay:.0f}s) unless it recovers"
        return Plan((), WAITING, message, delay - waited)
    record = PrimaryRecord(primary=chosen.pod, previous=target, reason=FAILOVER, decided_at=rfc3339(members.now))
    message = f"the primary {why}: failing over to {chosen.pod} ({choice_figures(members, target, chosen)})"
    return Plan((RecordPrimary(record),), FAILING_OVER, message)


def promotion(members: Members) -> Plan:
    """The recorded pod is still a standby: fence whatever may act as primary, wait for it to go, promote."""
    target, record = members.primary, members.record
    failover = record is None or record.reason == FAILOVER
    state = FAILING_OVER if failover else SWITCHING_OVER
    actions: list[Action] = []
    waiting: list[str] = []
    for other in members.others():
        name, facts = other["metadata"]["name"], members.facts(other["metadata"]["name"])
        acts_as_primary = facts is not None and not facts.in_recovery
        # The former primary's pod may have started again before the record named another one, and then
        # as the primary (whatever its label says): unless it was made after the decision (it read the
        # record as it started), only its own server's word that it is a standby spares it.
        former = (
            record is not None
            and name == record.previous
            and not (facts is not None and facts.in_recovery)
            and not made_after(other, record.decided_at)
        )
        if not (acts_as_primary or former or role_label(other) in (names.PRIMARY, names.FENCED)):
            continue
        if not deleting(other):
            actions.append(Fence(name, uid_of(other), FAILOVER_GRACE_SECONDS if failover else None))
            waiting.append(name)
        elif not stopped(members, other):
            waiting.append(name)
    moving = f"{'failing' if failover else 'switching'} over from {record.previous if record else '?'} to {target}"
    if waiting:
        if failover:
            actions += detached(members, target)
        return Plan(tuple(actions), state, moving, RECHECK_SECONDS)
    if failover and record is not None:
        # The old primary is gone now and streams to nobody: a replica that got more WAL from it
        # than the one chosen is the better choice, as long as nothing was promoted yet.
        chosen = choose_replica(members, exclude=record.previous)
        target_facts = members.facts(target)
        if (
            isinstance(chosen, InstanceFacts)
            and chosen.pod != target
            and target_facts is not None
            and chosen.wal_lsn > target_facts.wal_lsn
        ):
            better = dataclasses.replace(record, primary=chosen.pod)
            return Plan((RecordPrimary(better),), state, moving)
    if record is not None and record.reason == SWITCHOVER:
        short = switchover_short(members, target, record.previous)
        if short is not None:
            # Nothing was promoted: the old primary, shut down cleanly, comes back as the primary. Recorded as a
            # restart, so its pod, which may have started since as a replica waiting for TARGET, starts again.
            back = PrimaryRecord(
                primary=record.previous, previous=target, reason=RESTART, decided_at=rfc3339(members.now)
            )
            message = f"switchover to {target} aborted: {short}; {record.previous} stays the primary"
            return Plan((RecordPrimary(back),), state, message)
    why = how_it_stopped(members, record.previous) if failover and record is not None else ""
    return Plan((*actions, Promote(target, why)), state, moving)


def how_it_stopped(members: Members, former: str) -> str:
    """How the former primary is known to take no more writes, for the Promoted Event."""
    pod = members.pod(former)
    if pod is None:
        return f"{former} is gone"
    if members.facts(former) is not None:
        return f"{former} answers as a standby"
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if any(c.get("name") == names.POSTGRES_CONTAINER and (c.get("state") or {}).get("terminated") for c in statuses):
        return f"{former}'s server stopped"
    return f"the lease named another pod for {members.lease_held:.0f}s: {former} stopped its own server"
