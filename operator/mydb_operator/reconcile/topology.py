"""The primary: kept where the record says, moved when it stops serving or when asked.

Each pass asks the servers what they are (instances/probe.py), lets the
policies decide (policy/primary.py: failover and promotion; policy/maintenance.py:
a switchover asked for, one before a scale-down, the pods' restarts), carries
the actions out in order and, after a decision or a promotion, looks again in
the same pass, so a failover does not wait for the next wake-up."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from typing import Any

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail
from ..model.lease import lease_members
from ..model.observation import Observation
from ..model.pods import tls_secret
from ..model.record import FAILOVER, SWITCHOVER, parse_record, recorded_primary
from ..model.sighting import sighting_of
from ..model.spec import DatabaseSpec
from ..model.statefulset import update_revision, update_strategy
from ..policy import maintenance
from ..policy.actions import SERVING, WAITING, Plan, Promote, RecordPrimary
from ..policy.members import Members, deleting
from ..policy.primary import plan
from .primary_pass import Pass, Topology, settings_of
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
    count = 0 if spec is not None and spec.hibernate else spec.replicas if spec is not None else len(step.pods)
    await step.read_lease(lease_members(name, count, step.pods))
    answered: str | None = None  # a switchover request whose decision is to be recorded in this round
    for _ in range(ROUNDS):
        step.report.probes = await step.servers.ask(step.pods)
        members = step.members(settings, previous, watch.sighting, watch.watching_since, full, was_full)
        watch.saw(members.sighting)
        step.report.archived = dict(watch.archived)
        decided = plan(members)
        if failover_on_an_unasked_primary(decided, members):
            # The decision stands on the pod's readiness: ask the primary's server itself first.
            answer = await step.servers.ask_one(step.pods, members.primary, CONFIRM_SECONDS)
            if answer is not None:
                step.report.probes[members.primary] = answer
                members = dataclasses.replace(members, probes=dict(step.report.probes))
                decided = plan(members)
        if decided.state == SERVING and not decided.actions:
            decided, answered = await planned_move(step, members, annotations, observed, spec)
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
        if answered is not None:  # only now that its decision is recorded: a kill before would forget it
            await step.api.remove_annotation(namespace, name, names.SWITCHOVER_ANNOTATION, answered)
            answered = None
        if not looks_again:
            break
    # A fresh position for the lag of a failover: read between passes, the primary alone (read_position).
    serving_with_replicas = step.report.plan.state == SERVING and watch.sighting is not None and len(step.pods) > 1
    step.report.reads_position = serving_with_replicas and not settings.synchronous
    return step.report


async def read_position(namespace: str, name: str, spec: DatabaseSpec | None, runtime: Runtime) -> bool:
    """Between passes: ask the recorded primary alone what it is, and keep its answer as the sighting (one
    session, no status, no API request). False when it does not answer as the primary (or the cache cannot
    say which pod it is): the daemon runs a whole pass at once."""
    observed = runtime.children.observation(namespace, name)
    if observed is None:
        return False
    primary = recorded_primary(name, parse_record(observed.record))
    answer = await Servers(namespace, name, spec, runtime).ask_one(list(observed.pods), primary, CONFIRM_SECONDS)
    seen = sighting_of(primary, {primary: answer} if answer is not None else {}, datetime.now(UTC))
    if seen is None:
        return False
    runtime.watches.of((namespace, name)).saw(seen)
    return True


def failover_on_an_unasked_primary(decided: Plan, members: Members) -> bool:
    """DECIDED records a failover from a primary whose server this pass did not ask (its pod is not ready)."""
    records = [a.record for a in decided.actions if isinstance(a, RecordPrimary)]
    if not records or records[0].reason != FAILOVER or members.primary in members.probes:
        return False
    pod = members.pod(members.primary)
    return pod is not None and not deleting(pod) and bool((pod.get("status") or {}).get("podIP"))


async def planned_move(
    step: Pass, members: Members, annotations: dict[str, str], observed: Observation, spec: DatabaseSpec | None
) -> tuple[Plan, str | None]:
    """While the primary serves: a switchover asked for, then one a scale-down needs, then the next restart.
    With the plan, the switchover request it answers by a decision (its annotation goes once that is recorded)."""
    requested = annotations.get(names.SWITCHOVER_ANNOTATION)
    if requested:
        answer = maintenance.requested_switchover(members, requested)
        if answer.action is not None:
            return Plan((answer.action,), SERVING, answer.message), requested
        await step.api.remove_annotation(step.namespace, step.name, names.SWITCHOVER_ANNOTATION, requested)
        record = members.record
        if record is not None and record.reason == SWITCHOVER and record.primary == requested:
            pass  # carried out already: the operator stopped before it could remove the annotation
        elif answer.refused:
            step.report.events.append(("Warning", "SwitchoverRefused", f"switchover to {requested}: {answer.message}"))
        else:
            step.report.events.append(("Normal", "SwitchoverNotNeeded", answer.message))
    if spec is not None and not spec.hibernate:
        moved = maintenance.scale_down_switchover(members, spec.replicas)
        if moved is not None:
            if moved.action is not None:
                return Plan((moved.action,), SERVING, moved.message), None
            step.report.note = moved.message
            return Plan((), SERVING, moved.message), None
    if update_strategy(observed.statefulset) == "OnDelete":
        desired = ((observed.statefulset or {}).get("spec") or {}).get("replicas")
        template = (((observed.statefulset or {}).get("spec") or {}).get("template") or {}).get("spec")
        revision = update_revision(observed.statefulset)
        restart = maintenance.next_restart(members, revision, desired, tls_secret(template))
        if restart is not None:
            return Plan((restart,), SERVING, "restarting the pods onto the current template"), None
    return Plan((), SERVING), None
