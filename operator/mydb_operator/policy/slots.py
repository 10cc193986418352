"""Each replica's replication slot on the primary: made, used, and dropped when no pod needs it. Pure.

Without a slot, a replica paused or cut off for longer than wal_keep_size
covers can never catch up: the primary has recycled the WAL it needs. A slot
keeps that WAL on the primary (max_slot_wal_keep_size bounds how much, so a
replica gone for good cannot fill the primary's disk). A slot lives on one
server: after a failover or a switchover the new primary has none, so they are
made again there, before the replicas follow it; a replica's own start
(entrypoint.sh) makes its slot too, so the chart alone streams through one."""

from __future__ import annotations

from .. import names
from ..model.instances import InstanceFacts
from .actions import Action, CreateSlot, DropSlot, UseSlot
from .members import Members, deleting


def slot_actions(members: Members) -> list[Action]:
    """What the serving primary's slots need: one per replica pod, none for pods that are gone (an idle one:
    a slot in use is a replica still streaming), and each answering replica streaming through its own."""
    primary = members.facts(members.primary)
    if primary is None or primary.in_recovery:
        return []
    existing = dict(primary.replica_slots)
    wanted = {names.replica_slot(p["metadata"]["name"]): p["metadata"]["name"] for p in members.others()}
    actions: list[Action] = [CreateSlot(members.primary, slot) for slot in sorted(wanted) if slot not in existing]
    actions += [
        DropSlot(members.primary, slot)
        for slot, active in sorted(existing.items())
        if slot not in wanted and not active
    ]
    for slot, pod in sorted(wanted.items()):
        facts, found = members.facts(pod), members.pod(pod)
        if uses_another(facts, slot) and found is not None and not deleting(found):
            actions.append(UseSlot(pod, slot))
    return actions


def uses_another(facts: InstanceFacts | None, slot: str) -> bool:
    """An answering replica that does not stream through SLOT."""
    return facts is not None and facts.in_recovery and facts.slot_name != slot
