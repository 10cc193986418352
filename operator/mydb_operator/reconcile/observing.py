"""Where a reconcile's Observation comes from: the informers' cache when it can answer, else the API."""

from __future__ import annotations

from ..model.observation import Observation
from ..model.spec import DatabaseSpec
from ..policy.drift import missing_child
from ..telemetry import metrics
from .runtime import Runtime


def from_cache(namespace: str, name: str, runtime: Runtime) -> Observation | None:
    """The cache's Observation, or None while it cannot know everything (before its first listing)."""
    cached = runtime.children.observation(namespace, name)
    if cached is not None:
        metrics.OBSERVATIONS.labels("cache").inc()
    return cached


async def observe_fresh(namespace: str, name: str, runtime: Runtime) -> Observation:
    """From the API, for decisions that act; the cache then waits to catch up with what it saw."""
    observed = await runtime.api.observation(namespace, name)
    metrics.OBSERVATIONS.labels("api").inc()
    runtime.children.await_statefulset(namespace, name, observed.statefulset)
    return observed


async def observe_after_helm(namespace: str, name: str, spec: DatabaseSpec, runtime: Runtime) -> Observation:
    """What Helm just applied, for the status: one read of the StatefulSet, then the cache once
    it shows that version and every object of the release (the whole API read if it lags)."""
    runtime.children.await_statefulset(namespace, name, await runtime.api.read_statefulset(namespace, name))
    observed = await runtime.children.caught_up(
        namespace, name, lambda s: missing_child(spec, s, name) is None, runtime.catch_up_seconds
    )
    if observed is None:
        return await observe_fresh(namespace, name, runtime)
    metrics.OBSERVATIONS.labels("cache").inc()
    return observed
