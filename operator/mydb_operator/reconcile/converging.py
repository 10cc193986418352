"""Converging: run Helm only if the values changed or a child drifted, deciding again on a fresh read."""

from __future__ import annotations

from typing import Any

from ..model.observation import Observation
from ..model.spec import DatabaseSpec
from .acting import act
from .observing import observe_fresh
from .outcomes import Converged
from .planning import decide
from .runtime import Runtime


async def converge(
    name: str,
    namespace: str,
    spec: DatabaseSpec,
    seen: Observation,
    applied: dict[str, Any] | None,
    operation: dict[str, Any] | None,
    runtime: Runtime,
    fresh: bool = False,
) -> Converged:
    """Run Helm if the values changed or a child drifted; grow storage first when asked.

    `seen` may come from the cache (fresh=False); anything that acts is decided
    again on a fresh API read, so a cache a moment behind never runs Helm. The
    one exception is a first install onto nothing: Helm runs whatever a read
    would show, and with no StatefulSet or claim there is no version or size
    to hold back."""
    decision = await decide(name, spec, seen, applied, runtime)
    if decision.why is None:
        return Converged(seen, applied, operation, problem=decision.problem, storage_blocked=decision.storage_blocked)
    onto_nothing = not applied and seen.statefulset is None and not seen.claims
    # Only a few databases act at once: hundreds of reconciles waiting for a Helm
    # slot, each holding a fresh read of whole objects, were most of the peak memory.
    async with runtime.acting:
        if not (fresh or onto_nothing):
            seen = await observe_fresh(name, namespace, runtime)
            decision = await decide(name, spec, seen, applied, runtime)
            if decision.why is None:
                return Converged(
                    seen, applied, operation, problem=decision.problem, storage_blocked=decision.storage_blocked
                )
        return await act(name, namespace, spec, seen, applied, operation, decision, runtime)
