"""status.conditions entries: each keeps its lastTransitionTime while its status holds. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ConditionMaker:
    """One pass's conditions: what every one of them shares (the last status's conditions, the time, the
    generation seen), so each is made from its own four facts: type, status, reason, message."""

    previous: tuple[dict[str, Any], ...]
    now: str
    generation: int

    def __call__(self, type_: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(self.previous, type_, status, reason, message, self.now, self.generation)


def resizing_condition(
    spec: DatabaseSpec | None, observation: Observation, blocked: str | None, make: ConditionMaker
) -> dict[str, Any]:
    """True while some data claim has not reached spec.storage (the driver is still expanding it)."""
    if blocked:
        return make("Resizing", False, "ExpansionNotSupported", blocked)
    # A claim not bound yet has no capacity: it is being provisioned at its size, not expanded.
    bound = [c for c in observation.claims if ((c.get("status") or {}).get("capacity") or {}).get("storage")]
    short = claims_short_of(bound, spec.storage) if spec and bound else []
    if spec and short:
        done = len(bound) - len(short)
        return make(
            "Resizing",
            True,
            "ExpandingVolumes",
            f"{done}/{len(bound)} claims at {spec.storage}; waiting for {', '.join(short)}",
        )
    return make("Resizing", False, "AtRequestedSize", "every claim has its requested size")
