"""Converging: run Helm only if the values changed or a child drifted, deciding again on a fresh read."""

from __future__ import annotations

from ..model.observation import Observation
from .acting import act
from .observing import observe_fresh
from .outcomes import Outcome, Target
from .planning import decide
from .runtime import Runtime


async def converge(
    target: Target, observed: Observation, runtime: Runtime, *, fresh: bool = False, urgent: bool = False
) -> Outcome:
    """Run Helm if the values changed or a child drifted; grow storage first when asked.

    `observed` may come from the cache (fresh=False); anything that acts is decided
    again on a fresh API read, so a cache a moment behind never runs Helm. The
    one exception is a first install with nothing of the database there yet:
    Helm runs whatever a read would show, and with no StatefulSet or claim there
    is no version or size to hold back.

    URGENT: the primary is moving (a failover under way): when every permit to act is taken by other
    databases' Helm runs, this pass leaves Helm for later rather than queue, so the failover's next step
    is not held behind them (the outcome says so: `deferred`)."""
    decision = await decide(target, observed, runtime)
    if decision.why is None:
        return decision.unchanged(target, observed)
    if urgent and runtime.acting.locked():
        outcome = decision.unchanged(target, observed)
        outcome.deferred = True
        return outcome
    first_install = not target.applied and observed.statefulset is None and not observed.claims
    if first_install:  # new databases take turns, so their pods do not all queue at once
        await runtime.rollouts.enter((target.namespace, target.name))
    # Only a few databases act at once: hundreds of reconciles waiting for a Helm
    # slot, each holding a fresh read of whole objects, were most of the peak memory.
    async with runtime.acting:
        if not (fresh or first_install):
            observed = await observe_fresh(target.namespace, target.name, runtime)
            decision = await decide(target, observed, runtime)
            if decision.why is None:
                return decision.unchanged(target, observed)
        return await act(target, observed, decision, runtime)
