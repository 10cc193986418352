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


def test_each_answering_replica_reports_its_lag_and_whether_it_is_out_of_the_read_only_service() -> None:
    pods = [{"metadata": {"name": n, "labels": {"myapp.example.com/role": r}}}
            for n, r in (("db-0", "primary"), ("db-1", "replica"), ("db-2", "lagging"), ("db-3", "replica"))]
    instances = [
        {"name": "db-0", "role": "primary", "lsn": "0/5000000"},
        {"name": "db-1", "role": "replica", "lagBytes": 0, "state": "streaming"},
        {"name": "db-2", "role": "replica", "lagBytes": 300_000_000, "state": "not streaming"},
        {"name": "db-3", "role": "replica", "state": "no answer: timeout"},  # no figure: not reported
    ]
    assert reporting.replica_figures(instances, pods) == {"db-1": (0, False), "db-2": (300_000_000, True)}


def test_a_replica_no_longer_reported_leaves_the_metrics() -> None:
    from prometheus_client import REGISTRY

    from mydb_operator.telemetry import metrics

    def lag(pod: str) -> float | None:
        return REGISTRY.get_sample_value("mydb_replica_lag_bytes", {"namespace": "m", "database": "d", "pod": pod})

    metrics.set_replicas(("m", "d"), {"d-1": (10, False), "d-2": (900, True)})
    assert (lag("d-1"), lag("d-2")) == (10, 900)
    assert REGISTRY.get_sample_value("mydb_replica_behind", {"namespace": "m", "database": "d", "pod": "d-2"}) == 1
    metrics.set_replicas(("m", "d"), {"d-1": (0, False)})
    assert (lag("d-1"), lag("d-2")) == (0, None)
    metrics.set_replicas(("m", "d"), {})
    assert lag("d-1") is None
