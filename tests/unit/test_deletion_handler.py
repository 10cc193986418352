"""The deletion handler waits for the database's daemon to leave before it deletes the release records:
a Helm run the daemon is in would otherwise write a record after them, one that outlives the database."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fake_api import FakeHelm

from mydb_operator.cluster import writes
from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.watched_kinds import KINDS
from mydb_operator.config import Config
from mydb_operator.handlers import deletion
from mydb_operator.handlers.memo import OperatorMemo
from mydb_operator.handlers.wakeups import Wakeups
from mydb_operator.reconcile.runtime import Runtime

SPEC = {"replicas": 1, "version": "15.2", "storage": "1Gi", "deletionPolicy": "Retain"}


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    done: list[str] = []

    async def record(*args: Any) -> None:
        done.append("status")

    async def records_deleted(*args: Any) -> None:
        done.append("records deleted")

    monkeypatch.setattr(writes, "patch_status", record)
    monkeypatch.setattr(writes, "delete_release_records", records_deleted)
    return done


def memo() -> OperatorMemo:
    children = ChildStore(on_change=lambda *_: None)
    runtime = Runtime(helm=FakeHelm(), children=children, owns_children=True)  # type: ignore[arg-type]
    return OperatorMemo(config=Config(), runtime=runtime, wakeups=Wakeups())


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


def test_the_records_go_only_after_the_daemons_helm_run_ends(steps: list[str]) -> None:
    async def scenario() -> None:
        shared = memo()
        owned_statefulset(shared)
        wake = shared.wakeups.register(("ns", "db"))

        async def daemon_finishing_helm() -> None:
            await asyncio.sleep(0.3)
            steps.append("helm run ended")
            shared.wakeups.unregister(("ns", "db"), wake)

        finishing = asyncio.create_task(daemon_finishing_helm())
        await delete(shared)
        await finishing

    asyncio.run(scenario())
    assert steps == ["helm run ended", "status", "records deleted"]


def test_a_daemon_that_never_leaves_delays_deletion_a_bounded_time(steps: list[str], monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(deletion, "DAEMON_EXIT_SECONDS", 0.3)

    async def scenario() -> float:
        shared = memo()
        owned_statefulset(shared)
        shared.wakeups.register(("ns", "db"))
        started = time.monotonic()
        await delete(shared)
        return time.monotonic() - started

    took = asyncio.run(scenario())
    assert 0.3 <= took < 2, took
    assert steps == ["status", "records deleted"]
    assert "ns/db: a reconcile still runs after 0s; deleting anyway" in caplog.text
