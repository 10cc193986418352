"""One reconcile, stored: the status written when it changed (progress counters may wait a little), the pass counted."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .. import names
from ..model.pods import Object, role_label
from ..status.patch import PROGRESS_HOLD_SECONDS, hold_for, status_patch
from ..telemetry import metrics
from .orchestrator import reconcile
from .outcomes import Outcome
from .runtime import Runtime


@dataclass
class StoredStatus:
    """A daemon's knowledge of its database's .status between passes."""

    status: dict[str, Any] | None = None  # as last written (None: take the resource's own)
    held_since: float | None = None  # when a progress-only change was first held back

    def write_due_in(self) -> float | None:
        """Seconds until a held change must be written (None: nothing held)."""
        if self.held_since is None:
            return None
        return max(0.0, self.held_since + PROGRESS_HOLD_SECONDS - time.monotonic())


async def reconcile_and_store(body: dict[str, Any], stored: StoredStatus, runtime: Runtime) -> Outcome:
    """Reconcile, patch .status when it changed, and count the result; the API's errors pass through."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    previous = stored.status if stored.status is not None else body["status"]
    outcome = await reconcile(body, stored.status, runtime)
    patch = status_patch(previous, outcome.status)
    now = time.monotonic()
    if patch is None:
        stored.status, stored.held_since = outcome.status, None
    elif hold_for(previous, outcome.status, stored.held_since, now) is not None:
        stored.status = previous
        stored.held_since = stored.held_since if stored.held_since is not None else now
    else:
        await runtime.api.patch_status(namespace, name, patch)
        metrics.STATUS_WRITES.inc()
        stored.status, stored.held_since = outcome.status, None
    metrics.set_phase((namespace, name), outcome.status["phase"])
    metrics.set_replicas(
        (namespace, name), replica_figures(outcome.status.get("instances") or [], outcome.observed.pods)
    )
    metrics.RECONCILES.labels("problem" if outcome.problem else "ok").inc()
    if outcome.problem:
        metrics.ERRORS.labels(outcome.problem.reason).inc()
    return outcome


def replica_figures(instances: list[dict[str, Any]], pods: list[Object]) -> dict[str, tuple[int, bool]]:
    """Pod -> (lag bytes, behind) for each replica that answered: behind while its pod is labelled lagging
    (out of the read-only Service, policy/lagging.py)."""
    lagging = {p["metadata"]["name"] for p in pods if role_label(p) == names.LAGGING}
    return {
        entry["name"]: (int(entry["lagBytes"]), entry["name"] in lagging)
        for entry in instances
        if entry.get("role") == names.REPLICA and "lagBytes" in entry
    }


def count_api_failure(reason: str) -> None:
    metrics.RECONCILES.labels("error").inc()
    metrics.ERRORS.labels(reason).inc()
