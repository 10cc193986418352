"""status.conditions entries: each keeps its lastTransitionTime while its status holds. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..model.observation import Observation
from ..model.spec import DatabaseSpec
from ..policy.storage import claims_short_of


def condition(
    previous: Iterable[dict[str, Any]], type_: str, status: bool, reason: str, message: str, now: str, generation: int
) -> dict[str, Any]:
    """A condition that keeps its lastTransitionTime while its status does not change."""
    value = "True" if status else "False"
    old = next((c for c in previous if c.get("type") == type_), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value and old.get("lastTransitionTime") else now
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def resizing_condition(
    spec: DatabaseSpec | None,
    observation: Observation,
    blocked: str | None,
    previous: Iterable[dict[str, Any]],
    now: str,
    generation: int,
) -> dict[str, Any]:
    """True while some data claim has not reached spec.storage (the driver is still expanding it)."""
    if blocked:
        return condition(previous, "Resizing", False, "ExpansionNotSupported", blocked, now, generation)
    # A claim not bound yet has no capacity: it is being provisioned at its size, not expanded.
    bound = [c for c in observation.claims if ((c.get("status") or {}).get("capacity") or {}).get("storage")]
    short = claims_short_of(bound, spec.storage) if spec and bound else []
    if spec and short:
        done = len(bound) - len(short)
        return condition(
            previous,
            "Resizing",
            True,
            "ExpandingVolumes",
            f"{done}/{len(bound)} claims at {spec.storage}; waiting for {', '.join(short)}",
            now,
            generation,
        )
    return condition(
        previous, "Resizing", False, "AtRequestedSize", "every claim has its requested size", now, generation
    )
