"""The deletion handler waits for the database's daemon to leave before it deletes the release records:
a Helm run the daemon is in would otherwise write a record after them, one that outlives the database."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fake_api import FakeApi, FakeHelm, make_runtime

from mydb_operator.cluster.api import KubernetesApi
from mydb_operator.cluster.watched_kinds import KINDS
from mydb_operator.config import Config
from mydb_operator.handlers import deletion
from mydb_operator.handlers.memo import OperatorMemo
from mydb_operator.handlers.wakeups import Wakeups

SPEC = {"replicas": 1, "version": "15.2", "storage": "1Gi", "deletionPolicy": "Retain"}


def written(api: FakeApi) -> list[str]:
    return [call for call, *_ in api.writes]


def memo(api: FakeApi) -> OperatorMemo:
    runtime = make_runtime(FakeHelm(), api=api, owns_children=True)
    # The adapter itself is for the informers and the Lease: never used (nor connected) here.
    return OperatorMemo(config=Config(), runtime=runtime, wakeups=Wakeups(), api=KubernetesApi())


def owned_statefulset(shared: OperatorMemo) -> None:
    """The cache, synced, holds the release's StatefulSet owned by the MyDatabase: no helm uninstall."""
    for kind in KINDS:
        shared.runtime.children.replace(kind, None, [], listed_at=1)
    shared.runtime.children.replace("statefulsets", None, [{"metadata": {
        "name": "db", "namespace": "ns", "resourceVersion": "5", "labels": {"app.kubernetes.io/instance": "db",
                                                    "app.kubernetes.io/name": "mydatabase"},
        "ownerReferences": [{"uid": "u-1"}]}}], listed_at=1)


def delete(shared: OperatorMemo) -> Any:
    return deletion.delete_database(spec=SPEC, meta={"uid": "u-1"}, namespace="ns", name="db", memo=shared)


def test_the_records_go_only_after_the_daemons_helm_run_ends(api: FakeApi) -> None:
    steps: list[str] = []

    async def scenario() -> None:
        shared = memo(api)
        owned_statefulset(shared)
        wake = shared.wakeups.register(("ns", "db"))

        async def daemon_finishing_helm() -> None:
            await asyncio.sleep(0.3)
            steps.extend(written(api))
            steps.append("helm run ended")
            shared.wakeups.unregister(("ns", "db"), wake)

        finishing = asyncio.create_task(daemon_finishing_helm())
        await delete(shared)
        await finishing

    asyncio.run(scenario())
    assert steps == ["helm run ended"]  # nothing was written before
    assert written(api) == ["patch_status", "delete_release_records"]


def test_a_daemon_that_never_leaves_delays_deletion_a_bounded_time(api: FakeApi, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(deletion, "DAEMON_EXIT_SECONDS", 0.3)

    async def scenario() -> float:
        shared = memo(api)
        owned_statefulset(shared)
        shared.wakeups.register(("ns", "db"))
        started = time.monotonic()
        await delete(shared)
        return time.monotonic() - started

    took = asyncio.run(scenario())
    assert 0.3 <= took < 2, took
    assert written(api) == ["patch_status", "delete_release_records"]
    assert "ns/db: a reconcile still runs after 0s; deleting anyway" in caplog.text
