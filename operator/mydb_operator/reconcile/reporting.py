"""One reconcile, stored: the status written only when it changed, and the pass counted."""

from __future__ import annotations

from typing import Any

from ..cluster import writes
from ..status.patch import status_patch
from ..telemetry import metrics
from .orchestrator import reconcile
from .outcomes import Outcome
from .runtime import Runtime


async def reconcile_and_store(body: dict[str, Any], known_status: dict[str, Any] | None, runtime: Runtime) -> Outcome:
    """Reconcile, patch .status when it changed, and count the result; the API's errors pass through."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    outcome = await reconcile(body, known_status, runtime)
    previous = known_status if known_status is not None else body["status"]
    patch = status_patch(previous, outcome.status)
    if patch is not None:
        await writes.patch_status(namespace, name, patch)
        metrics.STATUS_WRITES.inc()
    metrics.set_phase((namespace, name), outcome.status["phase"])
    metrics.RECONCILES.labels("problem" if outcome.problem else "ok").inc()
    if outcome.problem:
        metrics.ERRORS.labels(outcome.problem.reason).inc()
    return outcome


def count_api_failure(reason: str) -> None:
    metrics.RECONCILES.labels("error").inc()
    metrics.ERRORS.labels(reason).inc()
