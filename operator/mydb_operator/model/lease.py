"""The primary lease: the Lease <name>-primary, what the operator and the pods read of it. Pure.

The operator names the primary in it (holderIdentity) and the database's pods in an annotation; the pod it
names renews it (the chart's lease.pl) and stops its server when it cannot confirm it for the chart's
primaryLease.fenceSeconds. So a primary the operator cannot reach is known to have stopped taking writes once
the Lease has stayed still for longer than that: the operator then promotes another pod
(policy/primary.promotion), not before."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import names

# The database's pods, "<pod>=<address>" each (the address empty while it has none): a primary that cannot
# renew asks each of them by address, with no name lookup to wait for (the chart's lease.pl).
MEMBERS_ANNOTATION = f"{names.GROUP}/members"
# The chart's primaryLease values (desired/values.py passes them): the holder renews every RENEW_SECONDS and
# stops its server FENCE_SECONDS after it last confirmed the lease.
RENEW_SECONDS = 2
FENCE_SECONDS = 6
# How long the Lease must have named another pod before the operator takes its former holder for stopped:
# FENCE_SECONDS (the former holder renews no more once it is not named, and its peers vouch for it no longer
# than that), and a margin for the fast shutdown itself and the requests in flight.
HANDOVER_SECONDS = FENCE_SECONDS + 2.0
# A holder renews every RENEW_SECONDS: a Lease that has not changed for two renewals, while its holder's server
# does not answer either, is a primary whose node is lost or cut off, though the API may still call its pod
# ready (the node controller says otherwise only after its grace, 40 s and more).
STILL_SECONDS = 2 * RENEW_SECONDS


@dataclass(frozen=True)
class LeaseFacts:
    holder: str
    members: tuple[str, ...]
    resource_version: str


@dataclass(frozen=True)
class LeaseSighting:
    """The Lease as this operator last read it, since when it has named its holder, since when it has not
    changed (the operator's own clock: client-go's leader election judges a lease by when it saw it change,
    never by a time written in it), and whether its holder was seen renewing it. The holder's renewals change
    the Lease, not the holder's moment."""

    facts: LeaseFacts | None
    holder_since: datetime
    changed_at: datetime
    # A read found a version this operator did not write, under the same holder: the holder renews it. Until
    # then, a Lease that stands still says nothing (a simulated pod, a pod without lease.pl, a holder that never
    # started, or an operator that started since).
    renewed: bool = False


def lease_members(release: str, count: int, pods: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """The members the lease names: ordinals 0 to COUNT - 1 of RELEASE, each with its pod's address."""
    addresses = {pod["metadata"]["name"]: (pod.get("status") or {}).get("podIP") or "" for pod in pods}
    pods_named = (names.pod_name(release, ordinal) for ordinal in range(count))
    return tuple(f"{pod}={addresses.get(pod, '')}" for pod in pods_named)


def parse_lease(lease: dict[str, Any] | None) -> LeaseFacts | None:
    if lease is None:
        return None
    metadata = lease.get("metadata") or {}
    listed = ((metadata.get("annotations") or {}).get(MEMBERS_ANNOTATION) or "").split(",")
    return LeaseFacts(
        holder=(lease.get("spec") or {}).get("holderIdentity") or "",
        members=tuple(member for member in listed if member),
        resource_version=metadata.get("resourceVersion", ""),
    )


def seen(before: LeaseSighting | None, facts: LeaseFacts | None, now: datetime) -> LeaseSighting:
    """The sighting after reading FACTS at NOW: the same holder keeps the moment it was first seen, the same
    resourceVersion the moment it was; another version under the same holder is its renewal."""
    known = before.facts if before is not None else None
    if before is None or known is None or facts is None or known.holder != facts.holder:
        return LeaseSighting(facts, now, now)
    if known.resource_version == facts.resource_version:
        return before
    return LeaseSighting(facts, before.holder_since, now, renewed=True)


def written(before: LeaseSighting | None, facts: LeaseFacts, now: datetime) -> LeaseSighting:
    """The sighting after this operator wrote FACTS at NOW: no renewal of anyone's, the same holder's moment kept."""
    known = before.facts if before is not None else None
    if before is None or known is None or known.holder != facts.holder:
        return LeaseSighting(facts, now, now)
    return LeaseSighting(facts, before.holder_since, now, renewed=before.renewed)


def held_for(sighting: LeaseSighting | None, now: datetime) -> float:
    """Seconds the Lease has named its holder, as far as this operator saw (0: never read)."""
    return 0.0 if sighting is None else (now - sighting.holder_since).total_seconds()


def still_for(sighting: LeaseSighting | None, now: datetime) -> float:
    """Seconds the Lease has not changed, as far as this operator saw (0: never read)."""
    return 0.0 if sighting is None else (now - sighting.changed_at).total_seconds()
