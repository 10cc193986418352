"""reconcile_and_store: a changed status is written, progress counters wait up to the hold, nothing is lost."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeApi, FakeHelm, make_runtime

from mydb_operator.model.observation import Observation
from mydb_operator.reconcile import reporting
from mydb_operator.reconcile.outcomes import Outcome
from mydb_operator.reconcile.reporting import StoredStatus, reconcile_and_store
from mydb_operator.status.patch import PROGRESS_HOLD_SECONDS

BODY = {"metadata": {"namespace": "ns", "name": "db"}, "spec": {}, "status": {}}
DEPLOYING = {"phase": "Deploying", "readyReplicas": 0, "message": "0/3 pods ready"}
ONE_READY = {"phase": "Deploying", "readyReplicas": 1, "message": "1/3 pods ready"}
RUNNING = {"phase": "Running", "readyReplicas": 3, "message": "3/3 pods ready"}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def written(api: FakeApi) -> list[dict[str, Any]]:
    """The merge patches of .status the API received, in order."""
    return [patch for _, _, patch in api.statuses]


def passes(monkeypatch: pytest.MonkeyPatch, api: FakeApi, clock: Clock, statuses: list[tuple[float, dict[str, Any]]],
           stored: StoredStatus | None = None) -> StoredStatus:
    """Run one reconcile_and_store per (seconds later, status the reconcile builds)."""
    monkeypatch.setattr(reporting.time, "monotonic", clock)
    stored = stored or StoredStatus()
    runtime = make_runtime(FakeHelm(), api=api)

    async def run() -> None:
        for later, status in statuses:
            clock.now += later

            async def reconcile(body: dict[str, Any], known: Any, runtime: Any, status: Any = status) -> Outcome:
                return Outcome(Observation(), None, None, status=dict(status))

            monkeypatch.setattr(reporting, "reconcile", reconcile)
            await reconcile_and_store(BODY, stored, runtime)

    asyncio.run(run())
    return stored


def test_pods_turning_ready_within_the_hold_cost_one_write_at_the_end(monkeypatch, api) -> None:
    stored = passes(monkeypatch, api, Clock(), [(0, DEPLOYING), (2, ONE_READY), (2, RUNNING)])
    assert [p["phase"] for p in written(api)] == ["Deploying", "Running"]
    assert written(api)[-1]["readyReplicas"] == 3 and stored.status == RUNNING and stored.held_since is None


def test_a_held_change_is_written_once_the_hold_is_over(monkeypatch, api) -> None:
    clock = Clock()
    stored = passes(monkeypatch, api, clock, [(0, DEPLOYING), (2, ONE_READY)])
    assert len(written(api)) == 1 and stored.status == DEPLOYING  # the stored status is still the written one
    assert stored.write_due_in() == PROGRESS_HOLD_SECONDS
    passes(monkeypatch, api, clock, [(PROGRESS_HOLD_SECONDS, ONE_READY)], stored)
    assert written(api)[-1] == {"phase": "Deploying", "readyReplicas": 1, "message": "1/3 pods ready"}
    assert stored.write_due_in() is None
