"""The primary lease: the Lease <name>-primary, what the operator and the pods read of it. Pure.

The operator names the primary in it (holderIdentity) and the database's pods in an annotation; the pod it
names renews it (the chart's lease.pl) and stops its server when it cannot confirm it for the chart's
primaryLease.fenceSeconds. So a primary the operator cannot reach is known to have stopped taking writes once
the Lease has stayed still for longer than that: the operator then promotes another pod
(policy/primary.promotion), not before."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import names

MEMBERS_ANNOTATION = f"{names.GROUP}/members"
# The chart's primaryLease values (desired/values.py passes them): the holder renews every RENEW_SECONDS and
# stops its server FENCE_SECONDS after it last confirmed the lease.
RENEW_SECONDS = 2
FENCE_SECONDS = 6
# How long the Lease must stay still before the operator takes its holder for stopped: FENCE_SECONDS, and a
# margin for the fast shutdown itself and the requests in flight.
STILL_SECONDS = FENCE_SECONDS + 2.0


@dataclass(frozen=True)
class LeaseFacts:
    holder: str
    members: tuple[str, ...]
    resource_version: str


@dataclass(frozen=True)
class LeaseSighting:
    """The Lease as this operator last read it, and since when it has not changed (the operator's own clock:
    client-go's leader election judges a lease by when it saw it change, never by the time written in it)."""

    facts: LeaseFacts | None
    unchanged_since: datetime


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
    """The sighting after reading FACTS at NOW: still since the same moment when nothing changed."""
    if before is not None and before.facts == facts:
        return before
    return LeaseSighting(facts, now)


def still_for(sighting: LeaseSighting | None, now: datetime) -> float:
    """Seconds the Lease has stayed as it is now, as far as this operator saw (0: never read)."""
    return 0.0 if sighting is None else (now - sighting.unchanged_since).total_seconds()
