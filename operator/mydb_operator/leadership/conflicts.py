"""Other instances' Leases: which live one overlaps this instance's scope, and what to tell the user. Pure."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import names
from ..model.timestamps import parse_time
from .scopes import ALL_NAMESPACES, describe_scope, scopes_overlap


class ScopeConflict(Exception):
    """Another live operator instance manages namespaces this one would manage too."""


@dataclass(frozen=True)
class LeaseView:
    """What the overlap check needs to know of one operator Lease."""

    namespace: str
    name: str
    holder: str | None
    renewed: datetime.datetime | None
    duration: int
    scope: str

    def live(self, now: datetime.datetime) -> bool:
        """Held and renewed within its duration: its holder may be acting right now."""
        if not self.holder or self.renewed is None:
            return False
        return self.renewed + datetime.timedelta(seconds=self.duration) >= now


def lease_view(lease: dict[str, Any]) -> LeaseView:
    """One Lease as the API's JSON shows it (renewTime in RFC 3339 with microseconds)."""
    metadata = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    return LeaseView(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        holder=spec.get("holderIdentity") or None,
        renewed=parse_time(spec.get("renewTime")),
        duration=spec.get("leaseDurationSeconds") or 0,
        scope=(metadata.get("annotations") or {}).get(names.OPERATOR_SCOPE_ANNOTATION) or ALL_NAMESPACES,
    )


def expired(lease: dict[str, Any], now: datetime.datetime) -> bool:
    """A Lease nobody renewed for its whole duration is free to take."""
    return not lease_view(lease).live(now)


def conflicting_lease(
    leases: Iterable[LeaseView], *, namespace: str, name: str, identity: str, scope: str, now: datetime.datetime
) -> LeaseView | None:
    """Another live Lease, held by someone else, whose scope overlaps ours; None when there is none.

    Our own Lease never conflicts: whoever holds it, we stand by for it."""
    for lease in sorted(leases, key=lambda lease: (lease.namespace, lease.name)):
        if (lease.namespace, lease.name) == (namespace, name) or lease.holder == identity:
            continue
        if lease.live(now) and scopes_overlap(lease.scope, scope):
            return lease
    return None


def conflict_message(theirs: LeaseView, *, namespace: str, name: str, scope: str, now: datetime.datetime) -> str:
    renewed = f"{(now - theirs.renewed).total_seconds():.0f}s ago" if theirs.renewed else "recently"
    return (
        f"mydb-operator: refusing to start: another mydb-operator instance, {theirs.holder}, holds the Lease "
        f"{theirs.namespace}/{theirs.name} (renewed {renewed}, lease {theirs.duration}s) and manages "
        f"{describe_scope(theirs.scope)}, which overlaps this instance's {describe_scope(scope)}; two operators "
        f"acting on the same databases at once undo each other's work. Either stop that instance; or run this "
        f"one with -n for namespaces the other does not manage; or, to run this one as its standby, point it at "
        f"the same Lease with --leader-lease-namespace {theirs.namespace} --leader-lease-name {theirs.name} "
        f"(this instance's Lease is {namespace}/{name}). A Lease that is no longer renewed stops counting "
        f"{theirs.duration}s after its last renewal."
    )
