"""policy/primary.py, candidates.py and maintenance.py: who is promoted, when, and in which order things happen."""

from __future__ import annotations

import dataclasses

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mydb_operator import names
from mydb_operator.model.instances import InstanceFacts, Standby, Unreachable, with_value
from mydb_operator.model.lease import FENCE_SECONDS, HANDOVER_SECONDS, STILL_SECONDS, LeaseFacts
from mydb_operator.model.record import FAILOVER, REBUILT, RESTART, SWITCHOVER, PrimaryRecord
from mydb_operator.policy import maintenance
from mydb_operator.policy.actions import (
    KeepLease,
    FAILING_OVER,
    SERVING,
    STARTING,
    STUCK,
    SWITCHING_OVER,
    WAITING,
    Fence,
    Label,
    Promote,
    RecordPrimary,
    Repoint,
    Restart,
)
from mydb_operator.policy.candidates import Refusal, choose_replica
from mydb_operator.model.sighting import Sighting, latest, sighting_of
from mydb_operator.policy.members import HaSettings, Members, unavailable_since
from mydb_operator.policy.primary import plan
from mydb_operator.reconcile.topology import failover_on_an_unasked_primary

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = HaSettings(failover_delay=3, max_lag=16 * 2**20, synchronous=False)
HOST = "db-{}.db-headless.ns.svc"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(ordinal: int, *, ready: bool = True, role: str | None = "replica", since: datetime = NOW - timedelta(hours=1),
        deleting: datetime | None = None, revision: str = "r1", terminated: bool = False) -> dict[str, Any]:
    labels = {"controller-revision-hash": revision, **({names.ROLE_LABEL: role} if role else {})}
    metadata: dict[str, Any] = {"name": f"db-{ordinal}", "uid": f"uid-{ordinal}", "labels": labels,
                                "creationTimestamp": stamp(NOW - timedelta(hours=2))}
    if deleting is not None:
        metadata["deletionTimestamp"] = stamp(deleting)
        metadata["deletionGracePeriodSeconds"] = 1
    state = {"terminated": {"exitCode": 137}} if terminated else {"running": {}}
    return {"metadata": metadata,
            "status": {"podIP": f"198.18.128.{10 + ordinal}",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": stamp(since)}],
                       "containerStatuses": [{"name": "postgres", "state": state}]}}


# A primary that has every replica's slot, in use (policy/slots.py's tests make their own).
SLOTS = tuple((f"mydb_replica_{n}", True) for n in range(5))


def primary_facts(ordinal: int, lsn: int = 1000) -> InstanceFacts:
    return InstanceFacts(pod=f"db-{ordinal}", in_recovery=False, timeline=1, wal_lsn=lsn, replica_slots=SLOTS)


def replica_facts(ordinal: int, received: int, replayed: int | None = None, upstream: int = 0,
                  receiver: str = "streaming") -> InstanceFacts:
    conninfo = f"host={HOST.format(upstream)} port=5432 user=replicator application_name=db-{ordinal}"
    return InstanceFacts(pod=f"db-{ordinal}", in_recovery=True, timeline=1, wal_lsn=received,
                         replay_lsn=received if replayed is None else replayed, receiver=receiver, conninfo=conninfo,
                         slot_name=f"mydb_replica_{ordinal}")


SEEN = object()  # members(): the default sighting, see there


def members(pods: list[dict[str, Any]], probes: list[Any], *, record: PrimaryRecord | None = None,
            served: bool = True, settings: HaSettings = SETTINGS, reference: int | None = None,
            now: datetime = NOW, sighting: Any = SEEN, watching_since: Any = SEEN,
            last_primary: str | None = None, lease: LeaseFacts | None = None, lease_held: float = 0.0,
            lease_members: tuple[str, ...] = (), lease_still: float = 0.0, lease_renewed: bool = False) -> Members:
    """The database as the decisions see it. Unless told otherwise, the operator read the recorded primary's
    position (REFERENCE, else 0) just as it stopped serving, with every replica that answered streaming, and
    has watched it down since then."""
    primary = (record.previous or record.primary) if record is not None else "db-0"
    down = next((p for p in pods if p["metadata"]["name"] == primary), None)
    if watching_since is SEEN:
        watching_since = unavailable_since(down) or now - timedelta(hours=1)
    serving = next((p for p in probes if isinstance(p, InstanceFacts) and not p.in_recovery), None)
    if sighting is SEEN and serving is not None and serving.standbys:
        sighting = sighting_of(serving.pod, {serving.pod: serving}, now)
    elif sighting is SEEN and serving is not None:  # a primary's facts without standbys: every replica streams
        streaming = {p.pod: p.wal_lsn for p in probes if isinstance(p, InstanceFacts) and p.in_recovery}
        sighting = Sighting(serving.pod, now, serving.wal_lsn, serving.timeline, streaming)
    elif sighting is SEEN:
        streaming = {p.pod: p.wal_lsn for p in probes if isinstance(p, InstanceFacts) and p.in_recovery}
        sighting = Sighting(primary, unavailable_since(down) or now, reference or 0, 1, streaming)
    return Members(namespace="ns", release="db", pods=tuple(pods), record=record,
                   probes={p.pod: p for p in probes}, settings=settings, now=now, served=served,
                   sighting=sighting, watching_since=watching_since, last_primary=last_primary, lease=lease,
                   lease_held=lease_held, lease_members=lease_members, lease_still=lease_still,
                   lease_renewed=lease_renewed)


# ---------------------------------------------------------------- the choice of a replica


def test_the_replica_with_the_most_received_wal_is_chosen_then_replayed_then_name():
    """CloudNativePG's order: received LSN, then replayed LSN, then the pod's name."""
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    by_received = members([down, pod(1), pod(2)], [replica_facts(1, 900), replica_facts(2, 950, 100)])
    assert choose_replica(by_received, exclude="db-0").pod == "db-2"
    by_replayed = members([down, pod(1), pod(2)], [replica_facts(1, 950, 940), replica_facts(2, 950, 930)])
    assert choose_replica(by_replayed, exclude="db-0").pod == "db-1"
    tie = members([down, pod(1), pod(2)], [replica_facts(2, 950), replica_facts(1, 950)])
    assert choose_replica(tie, exclude="db-0").pod == "db-1"


def test_a_replica_that_is_not_ready_did_not_answer_or_is_fenced_is_never_chosen():
    down = pod(0, ready=False, role="primary")
    chosen = members([down, pod(1, ready=False), pod(2), pod(3, role="fenced"), pod(4)],
                     [replica_facts(1, 990), Unreachable("db-2", "no answer in time"), replica_facts(3, 999),
                      replica_facts(4, 500)])
    assert choose_replica(chosen, exclude="db-0").pod == "db-4"
    nobody = members([down, pod(1, ready=False), pod(2)], [Unreachable("db-2", "no answer in time")])
    refusal = choose_replica(nobody, exclude="db-0")
    assert isinstance(refusal, Refusal)
    assert "db-1 is not ready" in refusal.why and "db-2 did not answer (no answer in time)" in refusal.why


def test_a_replica_further_behind_than_max_lag_is_not_promoted():
    """The lag is measured against the primary's last known position (the last status)."""
    down = pod(0, ready=False, role="primary")
    behind = members([down, pod(1)], [replica_facts(1, 1000)], reference=1000 + SETTINGS.max_lag + 1)
    refusal = choose_replica(behind, exclude="db-0")
    assert isinstance(refusal, Refusal) and "db-1" in refusal.why and "maxLagOnFailover" in refusal.why
    within = members([down, pod(1)], [replica_facts(1, 1000)], reference=1000 + SETTINGS.max_lag)
    assert choose_replica(within, exclude="db-0").pod == "db-1"
    no_reference = members([down, pod(1)], [replica_facts(1, 1000)])
    assert choose_replica(no_reference, exclude="db-0").pod == "db-1"


def test_synchronous_mode_promotes_only_when_every_replica_answered():
    """With ANY 1 (*), an acknowledged commit is on at least one replica: only the most advanced of all of
    them surely has it, so a replica that cannot be asked stops the failover; the lag limit is not used."""
    sync = HaSettings(failover_delay=3, max_lag=0, synchronous=True)
    down = pod(0, ready=False, role="primary")
    one_silent = members([down, pod(1), pod(2, ready=False)], [replica_facts(1, 900)], settings=sync)
    refusal = choose_replica(one_silent, exclude="db-0")
    assert isinstance(refusal, Refusal) and "synchronous replication: db-2 did not answer" in refusal.why
    everyone = members([down, pod(1), pod(2)], [replica_facts(1, 900), replica_facts(2, 950)], settings=sync,
                       reference=10_000)
    assert choose_replica(everyone, exclude="db-0").pod == "db-2"


def test_no_replica_at_all():
    refusal = choose_replica(members([pod(0, ready=False, role="primary")], []), exclude="db-0")
    assert isinstance(refusal, Refusal) and "no replica" in refusal.why


# ---------------------------------------------------------------- when a failover starts


def test_a_serving_primary_keeps_the_labels_and_the_replicas_on_it():
    """Steady: the recorded primary is labelled primary, the others replica; a replica following another
    host is pointed at the primary (the same conninfo, another host)."""
    facts = [primary_facts(0), replica_facts(1, 1000), replica_facts(2, 1000, upstream=1)]
    steady = plan(members([pod(0, role=None), pod(1, role=None), pod(2)], facts))
    assert steady.state == SERVING
    repoint = Repoint("db-2", f"host={HOST.format(0)} port=5432 user=replicator application_name=db-2")
    assert steady.actions == (Label("db-0", "primary"), Label("db-1", "replica"), repoint)


def test_a_primary_down_is_given_the_failover_delay_then_the_best_replica_is_recorded():
    since = NOW - timedelta(seconds=2)
    pods = [pod(0, ready=False, role="primary", since=since), pod(1), pod(2)]
    facts = [replica_facts(1, 900), replica_facts(2, 950)]
    waiting = plan(members(pods, facts))
    assert (waiting.state, waiting.actions) == (WAITING, ())
    assert waiting.recheck == pytest.approx(1.0) and "failoverDelay (3s)" in waiting.message
    later = plan(members(pods, facts, now=NOW + timedelta(seconds=1)))
    assert later.state == FAILING_OVER
    assert later.actions == (RecordPrimary(PrimaryRecord("db-2", "db-0", FAILOVER, stamp(NOW + timedelta(seconds=1)))),)


def test_a_flap_shorter_than_the_delay_changes_nothing():
    pods = [pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=2)), pod(1)]
    assert plan(members(pods, [replica_facts(1, 900)])).state == WAITING
    back = [pod(0, role="primary"), pod(1)]
    assert plan(members(back, [primary_facts(0), replica_facts(1, 1000)])) .actions == ()


def test_a_primary_that_never_served_is_waited_for_not_failed_over():
    """A new database (or one waking from hibernation) whose primary starts later than its replicas."""
    starting = plan(members([pod(0, ready=False, role="primary", since=NOW - timedelta(minutes=5)), pod(1)],
                            [replica_facts(1, 900)], served=False))
    assert (starting.state, starting.actions) == (STARTING, ())


def test_no_candidate_says_why_and_records_nothing():
    pods = [pod(0, ready=False, role="primary", since=NOW - timedelta(minutes=1)), pod(1, ready=False)]
    stuck = plan(members(pods, []))
    assert stuck.state == STUCK and stuck.actions == ()
    assert "no replica can take over: db-1 is not ready" in stuck.message


def test_a_deleted_primary_counts_from_its_deletion():
    gone = pod(0, role="primary", deleting=NOW - timedelta(seconds=1))  # grace 1 s: asked 2 s ago
    assert plan(members([gone, pod(1)], [replica_facts(1, 900)])).state == WAITING
    asked_long_ago = pod(0, role="primary", deleting=NOW - timedelta(seconds=5))
    assert plan(members([asked_long_ago, pod(1)], [replica_facts(1, 900)])).state == FAILING_OVER


# ---------------------------------------------------------------- fencing, then promotion


def recorded(to: str = "db-1", reason: str = FAILOVER) -> PrimaryRecord:
    return PrimaryRecord(to, "db-0", reason, stamp(NOW), resource_version="5")


def test_the_old_primary_is_fenced_before_anything_is_promoted():
    """The record names db-1, still a standby: db-0 (labelled primary) is fenced (labelled out of both
    Services, then deleted with a 1 s grace period), and nothing is promoted while it runs."""
    pods = [pod(0, ready=False, role="primary"), pod(1), pod(2)]
    facts = [replica_facts(1, 950), replica_facts(2, 900)]
    first = plan(members(pods, facts, record=recorded()))
    assert first.state == FAILING_OVER and first.recheck is not None
    assert first.actions == (Fence("db-0", "uid-0", 1), *detached_to(1, facts))
    still_running = [pod(0, ready=False, role="fenced", deleting=NOW + timedelta(seconds=1)), pod(1), pod(2)]
    assert plan(members(still_running, facts, record=recorded())).actions == detached_to(1, facts)
    repointed = [replica_facts(1, 950, upstream=1), replica_facts(2, 900, upstream=1)]
    assert plan(members(still_running, repointed, record=recorded())).actions == ()
    stopped = [pod(0, ready=False, role="fenced", deleting=NOW, terminated=True), pod(1), pod(2)]
    assert plan(members(stopped, facts, record=recorded())).actions == (Promote("db-1"),)
    # A new pod under the old primary's name may have started before the record, as the primary: it is
    # fenced too, unless its own server says it is a standby, or it was made after the decision.
    replaced = [pod(0, ready=False, role="replica"), pod(1), pod(2)]
    assert plan(members(replaced, facts, record=recorded())).actions == (Fence("db-0", "uid-0", 1), *detached_to(1, facts))
    standby = plan(members(replaced, [*facts, replica_facts(0, 100)], record=recorded()))
    assert standby.actions == (Promote("db-1"),)
    later = pod(0, ready=False, role="replica")
    later["metadata"]["creationTimestamp"] = stamp(NOW + timedelta(seconds=2))
    assert plan(members([later, pod(1), pod(2)], facts, record=recorded())).actions == (Promote("db-1"),)


def detached_to(ordinal: int, facts: list[InstanceFacts]) -> tuple[Repoint, ...]:
    """Every standby pointed at db-ORDINAL, itself included: none vouches for the old primary any longer."""
    return tuple(Repoint(f.pod, with_value(f.conninfo, "host", HOST.format(ordinal))) for f in facts)


def test_a_fenced_pod_whose_node_never_answers_is_taken_for_stopped_once_the_lease_stood_still_long_enough():
    """Its kubelet cannot confirm the kill: the pod, if it runs, stops its own server once it cannot renew the
    lease (the chart's lease.pl, within FENCE_SECONDS), so the promotion waits for the lease alone."""
    stuck = pod(0, ready=False, role="fenced", deleting=NOW - timedelta(minutes=5))
    facts = [replica_facts(1, 950)]
    moved = LeaseFacts("db-1", ("db-0", "db-1"), "7")

    def actions(lease: LeaseFacts | None, still: float) -> tuple[Any, ...]:
        return plan(members([stuck, pod(1)], facts, record=recorded(), lease=lease, lease_held=still)).actions

    assert actions(moved, HANDOVER_SECONDS - 0.1) == detached_to(1, facts)
    assert actions(moved, HANDOVER_SECONDS) == (Promote("db-1"),)
    assert actions(moved, HANDOVER_SECONDS)[0].why == "the lease named another pod for 8s: db-0 stopped its own server"
    assert HANDOVER_SECONDS > FENCE_SECONDS  # the old primary stopped before: never two primaries at once
    # A lease that still names the old primary (or none could be read) is no evidence of anything.
    assert actions(LeaseFacts("db-0", ("db-0", "db-1"), "7"), 3600) == detached_to(1, facts)
    assert actions(None, 3600) == detached_to(1, facts)


def test_a_ready_primary_that_is_silent_and_renews_its_lease_no_more_is_failed_over_without_the_node_grace():
    """Its node is lost or cut off: the API still calls its pod ready (the node controller says otherwise 40 s
    and more later), but its server does not answer and the lease it renews every 2 s stood still for two
    renewals. failoverDelay counts from when the lease stopped changing."""
    lost = [pod(0, role="primary"), pod(1), pod(2)]
    # Their receivers gave up on it (its node is gone): they no longer stream.
    facts = [Unreachable("db-0", "no answer in time"), replica_facts(1, 1000, receiver="waiting"),
             replica_facts(2, 990, receiver="waiting")]
    held = LeaseFacts("db-0", ("db-0=", "db-1=", "db-2="), "7")
    sighting = Sighting("db-0", NOW - timedelta(seconds=5), 1000, 1, {"db-1": 1000, "db-2": 990})

    def decided(still: float, probes: list[Any] = facts, lease: LeaseFacts | None = held,
                settings: HaSettings = SETTINGS, renewed: bool = True) -> Any:
        return plan(members(lost, probes, lease=lease, lease_still=still, sighting=sighting, settings=settings,
                            watching_since=NOW - timedelta(seconds=still), lease_renewed=renewed))

    failing = decided(STILL_SECONDS + SETTINGS.failover_delay)
    [record] = [a.record for a in failing.actions if isinstance(a, RecordPrimary)]
    assert (record.primary, record.previous, record.reason) == ("db-1", "db-0", FAILOVER)
    assert "db-0 does not answer, has not renewed the primary lease for 7s and streams to no replica" in (
        failing.message)
    # Silent, but not for failoverDelay yet: it waits, counting from when the lease stopped changing.
    waiting = decided(STILL_SECONDS + 1, settings=dataclasses.replace(SETTINGS, failover_delay=10))
    assert waiting.state == WAITING and not waiting.actions and "failoverDelay (10s)" in waiting.message
    assert waiting.recheck == 5
    # The lease moved a moment ago (the primary renews it; the operator alone cannot reach it): it serves, and
    # the operator looks again once the lease could have stood still long enough.
    renewing = decided(1.0)
    assert renewing.state == SERVING and not [a for a in renewing.actions if isinstance(a, RecordPrimary)]
    assert renewing.recheck == STILL_SECONDS - 1.0 + 0.5
    # A replica still streams from it: it serves them, and its clients beside them (cut off from the operator
    # and the API server only, as in a node blip); the replicas vouch for it.
    streaming = [facts[0], replica_facts(1, 1000), facts[2]]
    assert decided(60.0, probes=streaming).state == SERVING
    # Its server answers: whatever the lease, it serves.
    answering = decided(60.0, probes=[primary_facts(0), replica_facts(1, 1000), replica_facts(2, 990)])
    assert answering.state == SERVING and answering.recheck is None
    # The lease names another pod (a move under way), or none was read: no evidence of a silent primary.
    assert decided(60.0, lease=LeaseFacts("db-1", held.members, "8")).state == SERVING
    assert decided(60.0, lease=None).state == SERVING
    # A lease this operator never saw renewed (simulated pods, whose servers never answer; a pod without
    # lease.pl; an operator that started since) says nothing by standing still.
    never = decided(600.0, renewed=False)
    assert never.state == SERVING and never.recheck is None
    # A server that says it recovers from a crash is alive: no silence.
    recovering = [Unreachable("db-0", "FATAL: the database system is in recovery mode"), *facts[1:]]
    assert decided(60.0, probes=recovering).state == SERVING


def test_the_lease_names_the_recorded_primary_and_the_pods_first_in_a_failover_and_while_it_serves():
    facts = [replica_facts(1, 950)]
    pods = [pod(0, ready=False, role="fenced", deleting=NOW, terminated=True), pod(1)]
    wanted = ("db-0", "db-1")
    old = LeaseFacts("db-0", wanted, "7")
    failing_over = plan(members(pods, facts, record=recorded(), lease=old, lease_members=wanted))
    assert failing_over.actions == (KeepLease("db-1", wanted), Promote("db-1"))
    serving = [pod(0), pod(1, role="replica"), pod(2)]
    steady = plan(members(serving, [primary_facts(0), replica_facts(1, 1000), replica_facts(2, 1000)],
                          lease=None, lease_members=("db-0", "db-1", "db-2")))
    assert steady.actions[0] == KeepLease("db-0", ("db-0", "db-1", "db-2"))
    kept = LeaseFacts("db-0", ("db-0", "db-1", "db-2"), "9")
    assert KeepLease not in {type(a) for a in plan(members(serving, [primary_facts(0), replica_facts(1, 1000),
        replica_facts(2, 1000)], lease=kept, lease_members=kept.members)).actions}
    # A switchover aborted: the record names the old primary again (a restart), whose server waits for the lease
    # to name it before it serves; the lease follows the record though the primary does not serve yet.
    back = PrimaryRecord("db-0", "db-1", RESTART, stamp(NOW))
    restarting = plan(members([pod(0, ready=False, role="primary"), pod(1)], [replica_facts(1, 950)], record=back,
                              lease=LeaseFacts("db-1", wanted, "8"), lease_members=wanted))
    assert restarting.actions[0] == KeepLease("db-0", wanted)
    # One pod: nothing to fail over to, so no lease to keep.
    assert plan(members([pod(0, role="primary")], [primary_facts(0)], lease_members=("db-0",))).actions == ()


def test_a_server_that_says_it_is_primary_is_fenced_whatever_its_label():
    """The hung old primary resumed (SIGCONT) on its old timeline: it answers as a primary and is fenced."""
    facts = [replica_facts(1, 950), InstanceFacts("db-0", in_recovery=False, timeline=1, wal_lsn=990)]
    during = plan(members([pod(0, role="replica"), pod(1), pod(2)], facts, record=recorded()))
    assert during.actions[0] == Fence("db-0", "uid-0", 1)
    after = plan(members([pod(0, role="replica"), pod(1, role="primary")], [
        InstanceFacts("db-1", in_recovery=False, timeline=2, wal_lsn=2000), facts[1]], record=recorded()))
    assert after.state == SERVING and after.actions[0] == Fence("db-0", "uid-0", 1)


def test_a_switchover_fences_with_the_pods_own_grace_period():
    """A clean (fast) shutdown: its walsenders hand the replicas every record before it stops."""
    planned = plan(members([pod(0, role="primary"), pod(1)], [primary_facts(0), replica_facts(1, 1000)],
                           record=recorded(reason=SWITCHOVER)))
    assert planned.state == SWITCHING_OVER and planned.actions == (Fence("db-0", "uid-0", None),)


def test_after_the_old_primary_stopped_a_replica_with_more_wal_is_recorded_instead():
    stopped = pod(0, ready=False, role="fenced", deleting=NOW, terminated=True)
    better = plan(members([stopped, pod(1), pod(2)], [replica_facts(1, 950), replica_facts(2, 990)],
                          record=recorded("db-1")))
    assert better.actions == (RecordPrimary(PrimaryRecord("db-2", "db-0", FAILOVER, stamp(NOW), resource_version="5")),)


def test_once_promoted_the_labels_and_the_record_follow():
    after = plan(members([pod(0, ready=False, role="fenced", deleting=NOW, terminated=True), pod(1), pod(2)],
                         [InstanceFacts("db-1", False, 2, 2000), replica_facts(2, 2000, upstream=0)],
                         record=recorded()))
    assert after.state == SERVING
    assert after.actions[0] == Label("db-1", "primary")
    repoints = [a for a in after.actions if isinstance(a, Repoint)]
    assert len(repoints) == 1 and f"host={HOST.format(1)}" in repoints[0].conninfo
    assert after.actions[-1] == RecordPrimary(PrimaryRecord("db-1", "db-0", FAILOVER, stamp(NOW), stamp(NOW), "5"))


# ---------------------------------------------------------------- planned moves


def test_a_requested_switchover_is_checked_first():
    facts = [primary_facts(0, 5000), replica_facts(1, 5000), replica_facts(2, 100, receiver="waiting")]
    serving = members([pod(0, role="primary"), pod(1), pod(2)], facts)
    started = maintenance.requested_switchover(serving, "db-1")
    assert started.action is not None and started.action.record.primary == "db-1"
    assert started.action.record.reason == SWITCHOVER and not started.refused
    assert maintenance.requested_switchover(serving, "db-0").message == "db-0 is the primary already"
    for target, why in (("db-7", "no pod db-7"), ("db-2", "not streaming")):
        answer = maintenance.requested_switchover(serving, target)
        assert answer.refused and answer.action is None and why in answer.message


def test_a_restart_goes_replica_by_replica_then_one_switchover():
    old = {"revision": "r1"}
    facts = [primary_facts(0), replica_facts(1, 1000), replica_facts(2, 1000)]
    first = maintenance.next_restart(members([pod(0, role="primary", **old), pod(1, **old), pod(2, **old)], facts),
                                     "r2")
    assert first == Restart("db-2", "uid-2")
    busy = members([pod(0, role="primary", **old), pod(1, **old), pod(2, ready=False, revision="r2")], facts)
    assert maintenance.next_restart(busy, "r2") is None  # one at a time: db-2 is not back yet
    last = maintenance.next_restart(members([pod(0, role="primary", **old), pod(1, revision="r2"),
                                             pod(2, revision="r2")], facts), "r2")
    assert isinstance(last, RecordPrimary) and last.record.reason == SWITCHOVER
    assert last.record.primary in ("db-1", "db-2") and last.record.previous == "db-0"
    alone = maintenance.next_restart(members([pod(0, role="primary", **old)], [primary_facts(0)]), "r2", 1)
    assert alone == RecordPrimary(PrimaryRecord("db-0", reason=RESTART, decided_at=stamp(NOW)))
    decided = members([pod(0, role="primary", **old)], [primary_facts(0)], record=alone.record)
    assert maintenance.next_restart(decided, "r2", 1) == Restart("db-0", "uid-0")
    # Found in CI: a restarted replica's pod gone from the cache before its new one shows is not a single
    # instance; the primary waits instead of restarting in place.
    between = members([pod(0, role="primary", **old)], [primary_facts(0)])
    assert maintenance.next_restart(between, "r2", 2) is None
    done = members([pod(0, role="primary", revision="r2"), pod(1, revision="r2")], facts)
    assert maintenance.next_restart(done, "r2") is None


def test_a_scale_down_moves_a_primary_that_would_be_removed():
    facts = [replica_facts(0, 1000), replica_facts(1, 1000), primary_facts(2)]
    high = members([pod(0), pod(1), pod(2, role="primary")], facts, record=recorded("db-2", SWITCHOVER))
    moved = maintenance.scale_down_switchover(high, 2)
    assert moved is not None and moved.action is not None and moved.action.record.primary in ("db-0", "db-1")
    assert maintenance.scale_down_switchover(high, 3) is None
    assert maintenance.pods_kept("db", high.record, 2) == 3 and maintenance.pods_kept("db", None, 2) is None


def starting(pod_: dict[str, Any], started: datetime) -> dict[str, Any]:
    """POD_ with its server's container running since STARTED, not ready yet."""
    pod_["status"]["containerStatuses"] = [{"name": "postgres", "ready": False,
                                            "state": {"running": {"startedAt": stamp(started)}}}]
    return pod_


def test_a_primary_whose_pod_comes_back_by_itself_is_waited_for():
    """A restart of the whole database (or of its node, or of its container): the primary's server is
    starting again, and gets STARTUP_GRACE_SECONDS before a failover is decided; a pod that is not on its
    way up (hung long after its start, or not scheduled) gets only failoverDelay."""
    down = NOW - timedelta(minutes=5)
    back = starting(pod(0, ready=False, role="primary", since=down), NOW - timedelta(seconds=5))
    waiting = plan(members([back, pod(1)], [replica_facts(1, 900)]))
    assert (waiting.state, waiting.actions) == (STARTING, ()) and "is starting" in waiting.message
    too_long = starting(pod(0, ready=False, role="primary", since=down), NOW - timedelta(seconds=31))
    assert plan(members([too_long, pod(1)], [replica_facts(1, 900)])).state == FAILING_OVER
    hung = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))  # running for an hour
    assert plan(members([hung, pod(1)], [replica_facts(1, 900)])).state == FAILING_OVER
    # Started 20 s ago, ready, then hung 10 s ago: it served, so it is no pod coming up.
    served_then_hung = starting(pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10)),
                                NOW - timedelta(seconds=20))
    assert plan(members([served_then_hung, pod(1)], [replica_facts(1, 900)])).state == FAILING_OVER


def with_probe(pod_: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """POD_ with its probe container in STATE."""
    pod_["status"]["containerStatuses"].append({"name": "probe", "state": state})
    return pod_


def test_a_primary_whose_probe_container_restarts_is_waited_for():
    """The probe container answers the kubelet's probes: while it is down, or once it started again after the pod
    turned not ready, the readiness says nothing of the server, so the failover waits up to STARTUP_GRACE_SECONDS
    (bounded: it does not wait for ever on one that keeps failing). One running since before is no excuse: the
    server stopped answering."""
    down = NOW - timedelta(seconds=10)
    facts = [replica_facts(1, 900)]
    for state in ({"waiting": {"reason": "CrashLoopBackOff"}},
                  {"running": {"startedAt": stamp(NOW - timedelta(seconds=4))}}):
        restarting = with_probe(pod(0, ready=False, role="primary", since=down), state)
        waiting = plan(members([restarting, pod(1)], facts))
        assert (waiting.state, waiting.actions) == (WAITING, ()) and "probe container" in waiting.message, state
        long_ago = with_probe(pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=31)), state)
        assert plan(members([long_ago, pod(1)], facts)).state == FAILING_OVER, state
    steady_probe = with_probe(pod(0, ready=False, role="primary", since=down),
                              {"running": {"startedAt": stamp(NOW - timedelta(hours=1))}})
    assert plan(members([steady_probe, pod(1)], facts)).state == FAILING_OVER


def with_certificate(pod_body: dict[str, Any], secret: str) -> dict[str, Any]:
    return {**pod_body, "spec": {"volumes": [{"name": "tls", "secret": {"secretName": secret}}]}}


def test_a_restart_onto_another_certificate_secret_restarts_the_primary_first_in_place():
    """A replica restarted onto a new CA (TLS turned on, or the user's certificate in place of the operator's)
    could not verify the old primary: the primary restarts first, in place; then the replicas, as usual."""
    old = {"revision": "r1"}
    facts = [primary_facts(0), replica_facts(1, 1000)]
    plain = members([pod(0, role="primary", **old), pod(1, **old)], facts)
    first = maintenance.next_restart(plain, "r2", 2, "db-tls")
    assert first == RecordPrimary(PrimaryRecord("db-0", reason=RESTART, decided_at=stamp(NOW)))
    decided = members([pod(0, role="primary", **old), pod(1, **old)], facts, record=first.record)
    assert maintenance.next_restart(decided, "r2", 2, "db-tls") == Restart("db-0", "uid-0")
    assert maintenance.next_restart(plain, "r2", 2, "") == Restart("db-1", "uid-1")  # TLS stays off: as ever
    operators = members([with_certificate(pod(0, role="primary", **old), "db-tls"),
                         with_certificate(pod(1, **old), "db-tls")], facts)
    assert maintenance.next_restart(operators, "r2", 2, "db-tls") == Restart("db-1", "uid-1")  # the same CA
    assert isinstance(maintenance.next_restart(operators, "r2", 2, "platform-cert"), RecordPrimary)
    primary_done = members([with_certificate(pod(0, role="primary", revision="r2"), "platform-cert"),
                            with_certificate(pod(1, **old), "db-tls")], facts)
    assert maintenance.next_restart(primary_done, "r2", 2, "platform-cert") == Restart("db-1", "uid-1")


def test_a_primary_restarted_in_place_on_purpose_is_not_failed_over_while_it_comes_back():
    """The restart was recorded before the pod went: its absence is the plan, not a failure, for the pod's grace
    period and a start; a primary still gone after that is failed over as any other."""
    restart = PrimaryRecord("db-0", reason=RESTART, decided_at=stamp(NOW - timedelta(seconds=20)))
    gone = [pod(1), pod(2)]
    facts = [replica_facts(1, 1000), replica_facts(2, 1000)]
    waiting = plan(members(gone, facts, record=restart, reference=1000))
    assert waiting.actions == () and waiting.state == STARTING and "restarts" in waiting.message
    late = dataclasses.replace(restart, decided_at=stamp(NOW - timedelta(seconds=200)))
    down = dataclasses.replace(members(gone, facts, record=late, reference=1000),
                               down_since=NOW - timedelta(seconds=190))
    failing = plan(down)
    assert failing.state == FAILING_OVER and failing.actions[0].record.reason == FAILOVER


def test_a_primary_back_from_a_restart_that_then_stops_serving_gets_no_restart_grace():
    """A restart is over once the pod made for it answered as the primary: an outage after that (seen after an
    aborted switchover, whose record is a restart) is one like any other, not 150 s of waiting for a restart."""
    restart = PrimaryRecord("db-0", reason=RESTART, decided_at=stamp(NOW - timedelta(seconds=60)))
    back = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=5))
    back["metadata"]["creationTimestamp"] = stamp(NOW - timedelta(seconds=50))
    facts = [replica_facts(1, 1000), replica_facts(2, 1000)]
    streaming = {"db-1": 1000, "db-2": 1000}
    served = Sighting("db-0", NOW - timedelta(seconds=6), 1000, 1, streaming)
    outage = plan(members([back, pod(1), pod(2)], facts, record=restart, sighting=served))
    assert outage.state != STARTING, outage
    # Not yet seen serving from the new pod: still the restart's own absence.
    before = Sighting("db-0", NOW - timedelta(seconds=55), 1000, 1, streaming)
    restarting = plan(members([back, pod(1), pod(2)], facts, record=restart, sighting=before))
    assert restarting.state == STARTING and "restarts" in restarting.message, restarting


def test_a_replica_whose_data_volume_is_full_is_never_promoted():
    """It could not write either: the next best is chosen, and with none the refusal says why."""
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    both = members([down, pod(1), pod(2)], [replica_facts(1, 950), replica_facts(2, 900)])
    assert choose_replica(dataclasses.replace(both, full=frozenset({"db-1"})), exclude="db-0").pod == "db-2"
    refused = choose_replica(dataclasses.replace(both, full=frozenset({"db-1", "db-2"})), exclude="db-0")
    assert isinstance(refused, Refusal)
    assert "db-1's data volume is full" in refused.why and "db-2's data volume is full" in refused.why


def test_a_primary_down_with_a_full_volume_is_not_failed_over_and_is_restarted_once_it_grew():
    """As CloudNativePG: a replica has the same data to write, and the primary has every commit. While its volume is
    full, nothing moves; once the last status showed it full and the figures no longer do, it restarts in place
    (recorded first, then its pod goes), so it skips the crash loop's back-off; no replica is recorded."""
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(minutes=5), terminated=True)
    base = members([down, pod(1)], [replica_facts(1, 1000)])
    held = plan(dataclasses.replace(base, full=frozenset({"db-0"})))
    assert held.state == STUCK and held.actions == () and "data volume is full" in held.message
    grown = plan(dataclasses.replace(base, was_full=frozenset({"db-0"})))
    (record,) = grown.actions
    assert isinstance(record, RecordPrimary) and record.record.reason == RESTART and record.record.primary == "db-0"
    decided = dataclasses.replace(base, record=record.record)
    (restart,) = plan(decided).actions
    assert restart == Restart("db-0", "uid-0")
    assert plan(dataclasses.replace(base, full=frozenset({"db-1"}))).state == STUCK  # the only replica is full


# ---------------------------------------------------------------- fresh facts, a hard lag limit (a node's blip)
# The node-blip case: the node went Unknown, every pod of it was marked not ready, the operator could not reach
# the primary; on the node's return it failed a healthy primary over to a replica 1 GB behind.

GiB = 2**30


def blip_pods(primary_since: datetime) -> list[dict[str, Any]]:
    return [pod(0, ready=False, role="primary", since=primary_since), pod(1), pod(2)]


def test_a_primary_whose_server_answers_is_kept_whatever_its_pods_readiness_says():
    """Its pod unready for minutes (the node controller's word, a node that was Unknown), but its server, asked
    now, answers as the primary on the newest timeline: no failover, nothing recorded."""
    pods = blip_pods(NOW - timedelta(minutes=2))
    facts = [primary_facts(0, 5000), replica_facts(1, 5000), replica_facts(2, 5000)]
    kept = plan(members(pods, facts, reference=5000))
    assert kept.state == WAITING and kept.actions == ()
    assert "its server answers as the primary" in kept.message
    # A former primary answering on an older timeline than a replica is no such primary.
    older = dataclasses.replace(primary_facts(0, 5000), timeline=1)
    newer = dataclasses.replace(replica_facts(1, 5000), timeline=2)
    moved_on = plan(members(pods, [older, newer, replica_facts(2, 5000)], reference=5000, sighting=None))
    assert "answers as the primary" not in moved_on.message


def test_failover_delay_counts_from_when_a_replica_could_first_be_seen_to_take_over():
    """The primary's pod has been unready for two minutes, but in all that time no replica could be seen (the
    whole node was Unknown): the operator starts counting failoverDelay when it first sees one that could."""
    pods = blip_pods(NOW - timedelta(minutes=2))
    facts = [replica_facts(1, 1000), replica_facts(2, 1000)]
    first_look = plan(members(pods, facts, reference=1000, watching_since=None))
    assert first_look.state == WAITING and first_look.actions == ()
    assert first_look.recheck == pytest.approx(SETTINGS.failover_delay)
    a_second_later = plan(members(pods, facts, reference=1000, watching_since=NOW - timedelta(seconds=1)))
    assert a_second_later.state == WAITING and a_second_later.recheck == pytest.approx(2.0)
    watched_long_enough = plan(members(pods, facts, reference=1000, watching_since=NOW - timedelta(seconds=3)))
    assert watched_long_enough.state == FAILING_OVER


def test_a_replica_that_was_not_streaming_is_never_recorded_even_with_the_most_wal():
    """db-2 has the most WAL but was not in the primary's pg_stat_replication as streaming when the primary last
    answered: the streaming db-1 is chosen; with db-1 unready too, nothing is recorded at all."""
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    facts = [replica_facts(1, 1000), replica_facts(2, 1200)]
    seen = Sighting("db-0", NOW - timedelta(seconds=12), 1200, 1, {"db-1": 1000})
    chosen = plan(members([down, pod(1), pod(2)], facts, sighting=seen))
    assert chosen.state == FAILING_OVER and chosen.actions[0].record.primary == "db-1"
    alone = plan(members([down, pod(1, ready=False), pod(2)], facts, sighting=seen))
    assert alone.state == STUCK and alone.actions == ()
    assert "db-2 was not streaming from db-0 when it last answered" in alone.message


def test_a_replica_past_max_lag_is_never_recorded_not_even_for_a_moment():
    """The second blip: both replicas about 1 GB behind the primary's last position. No record, no Event, the
    refusal names each replica and its lag."""
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    facts = [replica_facts(1, 5 * GiB), replica_facts(2, 5 * GiB - 100 * 2**20)]
    stale = plan(members([down, pod(1), pod(2)], facts, reference=6 * GiB))
    assert stale.state == STUCK and stale.actions == ()
    assert f"db-1 is {GiB} bytes behind" in stale.message and "maxLagOnFailover" in stale.message
    assert "db-2 is" in stale.message


def test_the_lag_is_judged_only_on_a_primary_position_read_shortly_before_it_stopped():
    """A position read 31 s before the primary stopped serving is no reference: nothing is promoted until a
    fresh one is read. None read by this operator at all (it started after the primary stopped): the same."""
    since = NOW - timedelta(seconds=10)
    down = pod(0, ready=False, role="primary", since=since)
    facts = [replica_facts(1, 1000)]
    old = Sighting("db-0", since - timedelta(seconds=31), 1000, 1, {"db-1": 1000})
    refused = plan(members([down, pod(1)], facts, sighting=old))
    assert refused.state == STUCK and refused.actions == ()
    assert "last read 31s before it stopped serving" in refused.message
    fresh = dataclasses.replace(old, at=since - timedelta(seconds=9))
    assert plan(members([down, pod(1)], facts, sighting=fresh)).state == FAILING_OVER
    never = plan(members([down, pod(1)], facts, sighting=None))
    assert never.state == STUCK and "no WAL position of db-0 read while it served" in never.message
    another_primarys = dataclasses.replace(fresh, pod="db-1")
    assert plan(members([down, pod(1)], facts, sighting=another_primarys)).state == STUCK


def test_a_replica_on_another_timeline_than_the_primary_is_not_chosen():
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    forked = dataclasses.replace(replica_facts(1, 2000), timeline=2)
    chosen = plan(members([down, pod(1), pod(2)], [forked, replica_facts(2, 1000)], reference=1000))
    assert chosen.actions[0].record.primary == "db-2"
    refusal = choose_replica(members([down, pod(1)], [forked], reference=1000), exclude="db-0")
    assert isinstance(refusal, Refusal) and "db-1 is on timeline 2, db-0 was on 1" in refusal.why


def test_the_failover_message_carries_the_figures_the_choice_stood_on():
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    seen = Sighting("db-0", NOW - timedelta(seconds=12), 0x3000100, 1, {"db-1": 0x3000000})
    started = plan(members([down, pod(1)], [replica_facts(1, 0x3000000)], sighting=seen))
    assert "db-1 received 0/3000000 on timeline 1" in started.message
    assert "db-0 was at 0/3000100 2.0s before it stopped serving: 256 bytes behind it" in started.message


def test_a_sighting_lists_only_the_standbys_streaming_from_the_primary():
    facts = dataclasses.replace(primary_facts(0, 5000), standbys=(
        Standby("db-1", "streaming", "async", 4900, 4800), Standby("db-2", "catchup", "async", 100, 100)))
    seen = sighting_of("db-0", {"db-0": facts}, NOW)
    assert seen == Sighting("db-0", NOW, 5000, 1, {"db-1": 4900})
    assert sighting_of("db-1", {"db-1": replica_facts(1, 10)}, NOW) is None
    assert latest(seen, None) is seen and latest(None, None) is None


# ---------------------------------------------------------------- a lost record


def test_a_lost_record_is_written_again_from_the_server_that_answers_as_primary():
    """The record ConfigMap deleted after a failover moved the primary to db-1: ordinal 0 is a replica. No move,
    no fence: the record is written again naming db-1."""
    pods = [pod(0), pod(1, role="primary"), pod(2)]
    facts = [replica_facts(0, 1000, upstream=1), primary_facts(1, 1000), replica_facts(2, 1000, upstream=1)]
    rebuilt = plan(members(pods, facts, record=None, last_primary="db-1"))
    assert rebuilt.actions == (RecordPrimary(PrimaryRecord("db-1", reason=REBUILT, decided_at=stamp(NOW))),)
    assert not any(isinstance(a, Fence | Promote) for a in rebuilt.actions)


def test_a_lost_record_with_no_primary_answering_is_written_from_the_last_status():
    """No server answers as a primary (the primary is down too): the last pod the status confirmed is written,
    and the usual failover rules then apply to it."""
    pods = [pod(0), pod(1, ready=False, role="primary"), pod(2)]
    facts = [replica_facts(0, 1000, upstream=1), replica_facts(2, 1000, upstream=1)]
    rebuilt = plan(members(pods, facts, record=None, last_primary="db-1"))
    assert rebuilt.actions == (RecordPrimary(PrimaryRecord("db-1", reason=REBUILT, decided_at=stamp(NOW))),)


def test_two_servers_answering_as_primary_without_a_record_the_newest_timeline_wins():
    pods = [pod(0, role="primary"), pod(1, role="primary")]
    old = primary_facts(0, 9000)
    new = dataclasses.replace(primary_facts(1, 1000), timeline=2)
    rebuilt = plan(members(pods, [old, new], record=None, last_primary="db-1"))
    assert rebuilt.actions[0].record.primary == "db-1"


def test_no_record_and_ordinal_0_the_primary_needs_no_record():
    pods = [pod(0, role="primary"), pod(1)]
    steady = plan(members(pods, [primary_facts(0), replica_facts(1, 1000)], record=None, last_primary="db-0"))
    assert not any(isinstance(a, RecordPrimary) for a in steady.actions) and steady.state == SERVING
    new_database = plan(members([pod(0, ready=False, role=None), pod(1, ready=False)], [], record=None,
                                served=False))
    assert new_database.actions == ()


# ---------------------------------------------------------------- the last look before a failover is recorded


def test_a_failover_from_an_unasked_primary_with_an_address_is_confirmed_first():
    down = pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10))
    decided = plan(members([down, pod(1)], [replica_facts(1, 1000)], reference=1000))
    assert decided.state == FAILING_OVER
    assert failover_on_an_unasked_primary(decided, members([down, pod(1)], [replica_facts(1, 1000)]))
    asked = members([down, pod(1)], [replica_facts(1, 1000), Unreachable("db-0", "no answer in time")])
    assert not failover_on_an_unasked_primary(decided, asked)
    no_address = dict(down, status={**down["status"], "podIP": None})
    assert not failover_on_an_unasked_primary(decided, members([no_address, pod(1)], [replica_facts(1, 1000)]))


# ---------------------------------------------------------------- status tells the truth about replicas


def test_a_replica_not_streaming_on_another_timeline_or_past_max_lag_makes_the_database_degraded():
    """The blip's replicas, paused past wal_keep_size: ready, in recovery, not streaming. Ready stays True (the
    primary serves), but the phase is Degraded, reason ReplicasBehind, naming each one and why."""
    from mydb_operator.status.phases import DEGRADED, RUNNING, assess
    from mydb_operator.status.primary import PrimaryView, replicas_behind

    pods = [pod(0, role="primary"), pod(1), pod(2)]
    primary = primary_facts(0, 3 * GiB)
    stale = replica_facts(1, GiB, receiver="waiting")
    forked = dataclasses.replace(replica_facts(2, 3 * GiB), timeline=2)
    view = PrimaryView(probes={f.pod: f for f in (primary, stale, forked)})
    behind = replicas_behind("db", view, pods, SETTINGS.max_lag, NOW)
    assert behind == "db-1 is not streaming; db-2 is on timeline 2, the primary on 1: a failover would not promote them"
    lagging = PrimaryView(probes={f.pod: f for f in (primary, replica_facts(1, GiB), replica_facts(2, 3 * GiB))})
    assert replicas_behind("db", lagging, pods, SETTINGS.max_lag, NOW) == (
        f"db-1 is further behind the primary than maxLagOnFailover ({SETTINGS.max_lag} bytes): a failover would not "
        "promote them")
    healthy = PrimaryView(probes={f.pod: f for f in (primary, replica_facts(1, 3 * GiB), replica_facts(2, 3 * GiB))})
    assert replicas_behind("db", healthy, pods, SETTINGS.max_lag, NOW) is None
    just_ready = [pod(0, role="primary"), pod(1, since=NOW - timedelta(seconds=5)), pod(2)]
    assert replicas_behind("db", PrimaryView(probes={f.pod: f for f in (primary, stale)}), just_ready,
                           SETTINGS.max_lag, NOW) is None
    just_promoted = PrimaryView(record=PrimaryRecord("db-0", "db-1", FAILOVER, stamp(NOW), stamp(NOW)),
                                probes=view.probes)
    assert replicas_behind("db", just_promoted, pods, SETTINGS.max_lag, NOW) is None

    common = dict(problem=None, hibernating=False, installed=True, pods=3, ready_pods=3, desired=3,
                  rolled_out=True, failures=[])
    degraded = assess(**common, behind=behind)
    assert (degraded.phase, degraded.ready, degraded.reason) == (DEGRADED, True, "ReplicasBehind")
    assert "db-1 is not streaming" in degraded.message
    assert assess(**common).reason == "AllReplicasReady" and assess(**common).phase == RUNNING


# ---------------------------------------------------------------- a switchover's tail


def test_a_switchover_promotes_only_a_target_that_received_everything_else_the_old_primary_stays():
    """The old primary stopped (a clean shutdown): the target is promoted only when it received at least the old
    primary's last position the operator read and as much as any other replica; otherwise the switchover is
    aborted: the record names the old primary again, as a restart (its pod, made meanwhile as a replica waiting
    for the target, starts again), and nothing is promoted."""
    stopped = pod(0, ready=False, role="fenced", deleting=NOW, terminated=True)
    record = recorded("db-1", SWITCHOVER)
    seen = Sighting("db-0", NOW - timedelta(seconds=2), 5000, 1, {"db-1": 5000, "db-2": 5000})
    complete = plan(members([stopped, pod(1), pod(2)], [replica_facts(1, 5100), replica_facts(2, 5100)],
                            record=record, sighting=seen))
    assert complete.actions == (Promote("db-1"),)
    short = plan(members([stopped, pod(1), pod(2)], [replica_facts(1, 4000), replica_facts(2, 4000)],
                         record=record, sighting=seen))
    assert short.actions == (RecordPrimary(PrimaryRecord("db-0", "db-1", RESTART, stamp(NOW))),)
    assert "switchover to db-1 aborted: it received 0/FA0, less than db-0's last known position 0/1388" in short.message
    behind_another = plan(members([stopped, pod(1), pod(2)], [replica_facts(1, 5000), replica_facts(2, 5200)],
                                  record=record, sighting=seen))
    assert isinstance(behind_another.actions[0], RecordPrimary) and "less than db-2" in behind_another.message
    unasked = plan(members([stopped, pod(1), pod(2)], [replica_facts(2, 5200)], record=record, sighting=seen))
    assert not any(isinstance(a, RecordPrimary) for a in unasked.actions)  # silence aborts nothing


def test_a_restart_switchover_goes_only_to_a_replica_streaming_from_the_primary():
    """The pods' restart ends with a switchover: to the best replica that streams from the primary, as its own
    pg_stat_replication says; with none streaming, the primary restarts in place."""
    from mydb_operator.model.instances import Standby as Row

    old = {"revision": "r1"}
    primary = dataclasses.replace(primary_facts(0, 5000), standbys=(Row("db-2", "streaming", "async", 5000, 5000),))
    facts = [primary, replica_facts(1, 5000), replica_facts(2, 5000)]
    pods = [pod(0, role="primary", **old), pod(1, revision="r2"), pod(2, revision="r2")]
    moved = maintenance.next_restart(members(pods, facts), "r2")
    assert isinstance(moved, RecordPrimary) and moved.record.primary == "db-2"
    nobody = dataclasses.replace(primary, standbys=())
    in_place = maintenance.next_restart(members(pods, [nobody, *facts[1:]],
                                                sighting=sighting_of("db-0", {"db-0": nobody}, NOW)), "r2")
    assert isinstance(in_place, RecordPrimary) and in_place.record.reason == RESTART


def test_a_primary_recovering_from_a_crash_in_place_is_waited_for_within_a_bound():
    """A backend killed (the OOM killer): the postmaster restarts every backend and replays WAL in place, and its
    server says so (SQLSTATE 57P03). It serves again with every commit: no failover for up to 60 s; after
    that, as any other primary down."""
    recovering = Unreachable("db-0", "the database system is in recovery mode")
    shortly = [pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=10)), pod(1)]
    waited = plan(members(shortly, [recovering, replica_facts(1, 1000)], reference=1000))
    assert waited.state == WAITING and waited.actions == () and "recovers from a crash in place" in waited.message
    hung = plan(members(shortly, [Unreachable("db-0", "no answer in time"), replica_facts(1, 1000)], reference=1000))
    assert hung.state == FAILING_OVER
    too_long = [pod(0, ready=False, role="primary", since=NOW - timedelta(seconds=61)), pod(1)]
    assert plan(members(too_long, [recovering, replica_facts(1, 1000)], reference=1000,
                        sighting=Sighting("db-0", NOW - timedelta(seconds=62), 1000, 1, {"db-1": 1000}))
                ).state == FAILING_OVER


# ---------------------------------------------------------------- a replica behind leaves the read-only Service


def test_a_replica_behind_is_labelled_lagging_out_of_the_read_only_service_and_back_once_it_caught_up():
    """Serving arbitrarily old data is worse than not serving: a replica not streaming, on another timeline or
    further behind than maxLagOnFailover is labelled `lagging` (the read-only Service selects `replica`), and
    labelled `replica` again once within half the limit; a replica ready for less than 30 s is not judged."""
    from mydb_operator.status.primary import routing_gap

    limit = SETTINGS.max_lag
    primary = primary_facts(0, 3 * GiB)
    pods = [pod(0, role="primary"), pod(1), pod(2)]
    stalled = plan(members(pods, [primary, replica_facts(1, GiB, receiver="waiting"), replica_facts(2, 3 * GiB)]))
    assert Label("db-1", "lagging") in stalled.actions and not any(
        isinstance(a, Label) and a.pod == "db-2" for a in stalled.actions)
    lagging = [pod(0, role="primary"), pod(1, role="lagging"), pod(2)]
    near = plan(members(lagging, [primary, replica_facts(1, 3 * GiB - limit // 2 - 1), replica_facts(2, 3 * GiB)]))
    assert not any(isinstance(a, Label) and a.pod == "db-1" for a in near.actions)  # still lagging: no flap
    caught_up = plan(members(lagging, [primary, replica_facts(1, 3 * GiB - 100), replica_facts(2, 3 * GiB)]))
    assert Label("db-1", "replica") in caught_up.actions
    fresh = [pod(0, role="primary"), pod(1, since=NOW - timedelta(seconds=5)), pod(2)]
    connecting = plan(members(fresh, [primary, replica_facts(1, GiB, receiver="waiting"), replica_facts(2, 3 * GiB)]))
    assert not any(isinstance(a, Label) and a.pod == "db-1" for a in connecting.actions)
    # A lagging replica that turned ready again (its node came back) stays out until judged: settling is no
    # reason to serve reads of data it has not shown to be current.
    back = [pod(0, role="primary"), pod(1, role="lagging", since=NOW - timedelta(seconds=5)), pod(2)]
    settling = plan(members(back, [primary, replica_facts(1, GiB), replica_facts(2, 3 * GiB)]))
    assert not any(isinstance(a, Label) and a.pod == "db-1" for a in settling.actions), settling.actions
    # Ready waits for the read-only Service to route to the replicas that are not lagging only.
    assert routing_gap("db", "db-0", lagging, {"db": ("db-0",), "db-ro": ("db-2",)}) is None
    assert routing_gap("db", "db-0", lagging, {"db": ("db-0",), "db-ro": ("db-1", "db-2")}) is not None


# ---------------------------------------------------------------- replication slots


def test_the_primary_keeps_a_slot_per_replica_and_each_replica_streams_through_its_own():
    """A slot keeps on the primary the WAL a paused or cut-off replica still needs (wal_keep_size alone lets it
    go). After a failover the new primary has none: they are made there before the replicas are pointed at it;
    a slot of a pod scaled away is dropped when idle; a replica not streaming through its own is told to."""
    from mydb_operator.policy.actions import CreateSlot, DropSlot, UseSlot
    from mydb_operator.policy.slots import slot_actions

    def replica(ordinal: int, slot: str = "") -> InstanceFacts:
        return dataclasses.replace(replica_facts(ordinal, 1000), slot_name=slot or f"mydb_replica_{ordinal}")

    pods = [pod(0, role="primary"), pod(1), pod(2)]
    kept = dataclasses.replace(primary_facts(0), replica_slots=(("mydb_replica_1", True), ("mydb_replica_2", True)))
    bare = dataclasses.replace(primary_facts(0), replica_slots=())
    assert slot_actions(members(pods, [kept, replica(1), replica(2)])) == []
    new_primary = bare
    assert slot_actions(members(pods, [new_primary, replica(1), replica(2)])) == [
        CreateSlot("db-0", "mydb_replica_1"), CreateSlot("db-0", "mydb_replica_2")]
    scaled = dataclasses.replace(bare, replica_slots=(
        ("mydb_replica_1", True), ("mydb_replica_3", False), ("mydb_replica_4", True)))
    assert slot_actions(members(pods[:2], [scaled, replica(1)])) == [DropSlot("db-0", "mydb_replica_3")]
    assert slot_actions(members(pods[:2], [kept, dataclasses.replace(replica(1), slot_name="")])) == [
        UseSlot("db-1", "mydb_replica_1")]  # db-2's slot is in use: not dropped under a streaming replica
    # In the steady plan, before any repoint.
    steady = plan(members(pods, [new_primary, replica(1), dataclasses.replace(
        replica_facts(2, 1000, upstream=1), slot_name="mydb_replica_2")]))
    kinds = [type(a).__name__ for a in steady.actions]
    assert kinds.index("CreateSlot") < kinds.index("Repoint")


def test_a_replica_left_on_the_old_timeline_not_streaming_is_restarted_once_to_rejoin():
    """A replica that streamed from the old primary past the fork can never follow the new one as it is: settled
    past the promotion, still on the older timeline with its WAL receiver not streaming, its pod is deleted so
    its init container rewinds it (or keeps its data aside and clones). Once only: a pod made after the
    promotion is left alone (status says it is behind); one still catching up on the old timeline (streaming)
    is no such replica, nor is any while the promotion settles."""
    promoted = NOW - timedelta(minutes=2)
    record = PrimaryRecord("db-1", "db-0", FAILOVER, stamp(promoted - timedelta(seconds=5)), stamp(promoted))
    new_primary = dataclasses.replace(primary_facts(1, 9000), timeline=2, switchpoints=((1, 9200),))
    stuck = replica_facts(2, 9500, receiver="waiting", upstream=1)  # timeline 1, past the fork (9200)
    pods = [pod(0), pod(1, role="primary"), pod(2)]
    restarted = plan(members(pods, [replica_facts(0, 8000, upstream=1), new_primary, stuck], record=record))
    [restart] = [a for a in restarted.actions if isinstance(a, Restart)]
    assert (restart.pod, restart.uid) == ("db-2", "uid-2")
    # The Warning it comes with names the WAL of its own the rewind discards: from the fork to what it received.
    assert "discards 0/23F0 to 0/251C on it" in restart.why, restart.why
    # A WAL receiver started again reports what it received from its segment's start: what it replayed counts.
    restarted_receiver = dataclasses.replace(stuck, wal_lsn=8192, replay_lsn=9500)
    [again] = [a for a in plan(members(pods, [replica_facts(0, 8000, upstream=1), new_primary, restarted_receiver],
                                       record=record)).actions if isinstance(a, Restart)]
    assert "discards 0/23F0 to 0/251C on it" in again.why, again.why
    catching_up = replica_facts(2, 8000, receiver="streaming", upstream=1)
    assert not any(isinstance(a, Restart) for a in plan(members(pods, [new_primary, catching_up],
                                                                record=record)).actions)
    made_since = dict(pod(2), metadata={**pod(2)["metadata"], "creationTimestamp": stamp(promoted + timedelta(seconds=5))})
    assert not any(isinstance(a, Restart) for a in plan(members([pod(0), pod(1, role="primary"), made_since],
                                                                [new_primary, stuck], record=record)).actions)
    settling = dataclasses.replace(record, promoted_at=stamp(NOW - timedelta(seconds=10)))
    assert not any(isinstance(a, Restart) for a in plan(members(pods, [new_primary, stuck],
                                                                record=settling)).actions)


def test_a_replica_whose_server_exited_saying_it_diverged_is_restarted_at_once():
    """entrypoint.sh's serve exits 4 when its standby's history forked from the primary's (it would crash-loop on
    PostgreSQL's FATAL otherwise): the pod is deleted, whatever its facts (it answers nothing), so its init
    container rewinds it. Any other exit is the kubelet's to restart."""
    crashed = pod(2, ready=False)
    crashed["status"]["containerStatuses"] = [{"name": "postgres", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                               "lastState": {"terminated": {"exitCode": 4}}}]
    pods = [pod(0, role="primary"), pod(1), crashed]
    [restart] = [a for a in plan(members(pods, [primary_facts(0), replica_facts(1, 1000)])).actions
                 if isinstance(a, Restart)]
    assert (restart.pod, restart.uid) == ("db-2", "uid-2") and "history forked" in restart.why, restart
    crashed["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] = 1
    assert not any(isinstance(a, Restart) for a in plan(members(pods, [primary_facts(0),
                                                                      replica_facts(1, 1000)])).actions)
