"""Converging: run Helm only if the values changed or a child drifted, deciding again on a fresh read."""

from __future__ import annotations

from ..model.observation import Observation
from .acting import act
from .observing import observe_fresh
from .outcomes import Converged, Target
from .planning import decide
from .runtime import Runtime


async def converge(target: Target, seen: Observation, runtime: Runtime, *, fresh: bool = False) -> Converged:
    """Run Helm if the values changed or a child drifted; grow storage first when asked.

    `seen` may come from the cache (fresh=False); anything that acts is decided
    again on a fresh API read, so a cache a moment behind never runs Helm. The
    one exception is a first install onto nothing: Helm runs whatever a read
    would show, and with no StatefulSet or claim there is no version or size
    to hold back."""
    decision = await decide(target, seen, runtime)
    if decision.why is None:
        return Converged(
            seen, target.applied, target.operation, problem=decision.problem, storage_blocked=decision.storage_blocked
        )
    first_install = not target.applied and seen.statefulset is None and not seen.claims
    # Only a few databases act at once: hundreds of reconciles waiting for a Helm
    # slot, each holding a fresh read of whole objects, were most of the peak memory.
    async with runtime.acting:
        if not (fresh or first_install):
            seen = await observe_fresh(target.namespace, target.name, runtime)
            decision = await decide(target, seen, runtime)
            if decision.why is None:
                return Converged(
                    seen,
                    target.applied,
                    target.operation,
                    problem=decision.problem,
                    storage_blocked=decision.storage_blocked,
                )
        return await act(target, seen, decision, runtime)
