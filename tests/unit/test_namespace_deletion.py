"""A database whose namespace is being deleted is let go by its daemon: kopf, scoped by namespace patterns,
stops watching such a namespace and would never release the finalizer (reconcile/namespace_deletion.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from fake_api import FakeApi, FakeHelm, make_runtime, run
from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster.api import KubernetesApi
from mydb_operator.config import Config
from mydb_operator.handlers import daemon
from mydb_operator.handlers.memo import OperatorMemo
from mydb_operator.handlers.wakeups import Wakeups
from mydb_operator.policy.deletion import finalizers_without, marked_for_deletion
from mydb_operator.reconcile.namespace_deletion import (
    events_to_post,
    let_go_in_deleted_namespace,
    let_go_in_deleted_namespaces,
)

OTHER = "example.com/keep-me"


def database(*, deleting: bool, finalizers: tuple[str, ...] = (names.FINALIZER, OTHER)) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "db", "namespace": "ns", "resourceVersion": "7", "finalizers": list(finalizers)}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-04T18:24:38Z"
    return {"metadata": metadata, "spec": {"replicas": 1, "version": "15.2", "storage": "1Gi"}, "status": {}}


def released(api: FakeApi) -> list[tuple[Any, ...]]:
    return [write for write in api.writes if write[0] == "release_finalizer"]


def test_only_a_database_marked_for_deletion_holding_the_finalizer_is_let_go() -> None:
    assert marked_for_deletion(database(deleting=True))
    assert not marked_for_deletion(database(deleting=False))
    assert finalizers_without(database(deleting=True), names.FINALIZER) == [OTHER]
    assert finalizers_without(database(deleting=True, finalizers=(OTHER,)), names.FINALIZER) is None


def test_in_a_namespace_being_deleted_the_finalizer_is_released_at_the_version_read() -> None:
    api = FakeApi()
    api.databases[("ns", "db")] = database(deleting=True)
    api.terminating.add("ns")
    assert run(let_go_in_deleted_namespace(make_runtime(FakeHelm(), api=api), "ns", "db")) is True
    assert released(api) == [("release_finalizer", "ns", "db", "7", [OTHER])]
    assert api.databases[("ns", "db")]["metadata"]["finalizers"] == [OTHER]


def test_a_database_deleted_on_its_own_is_left_to_kopfs_deletion_handler() -> None:
    """Its namespace stays: kopf sees the deletion and runs the handler, whose steps (deletionPolicy) matter."""
    api = FakeApi()
    api.databases[("ns", "db")] = database(deleting=True)
    assert run(let_go_in_deleted_namespace(make_runtime(FakeHelm(), api=api), "ns", "db")) is False
    assert released(api) == []


def test_a_database_not_marked_for_deletion_stays_even_in_a_namespace_being_deleted() -> None:
    api = FakeApi()
    api.databases[("ns", "db")] = database(deleting=False)
    api.terminating.add("ns")
    assert run(let_go_in_deleted_namespace(make_runtime(FakeHelm(), api=api), "ns", "db")) is False
    assert released(api) == [] and ("namespace_terminating", "ns") not in api.reads  # one read when not marked


def test_a_database_already_gone_ends_its_daemon_and_an_unreadable_one_does_not() -> None:
    api = FakeApi()
    assert run(let_go_in_deleted_namespace(make_runtime(FakeHelm(), api=api), "ns", "db")) is True
    api.failing["read_database"] = ApiException(status=503)
    assert run(let_go_in_deleted_namespace(make_runtime(FakeHelm(), api=api), "ns", "db")) is False


class Stopped:
    """kopf's DaemonStopped as the daemon uses it: false until set, and awaitable."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


def test_the_daemon_ends_after_a_failed_pass_in_a_namespace_being_deleted() -> None:
    api = FakeApi()
    body = database(deleting=True)
    api.databases[("ns", "db")] = body
    api.terminating.add("ns")
    # In a namespace being deleted every write is refused; here the pass fails on its first read.
    api.failing["observation"] = ApiException(status=403, reason="Forbidden")
    memo = OperatorMemo(config=Config(), runtime=make_runtime(FakeHelm(), api=api), wakeups=Wakeups(),
                        api=KubernetesApi())

    async def scenario() -> None:
        await asyncio.wait_for(daemon.run_database(body=kopf.Body(body), namespace="ns", name="db",
                                                   stopped=Stopped(), memo=memo), timeout=5)

        # Gone for good: a deletion handler kopf might still run does not wait for it.
        await asyncio.wait_for(memo.wakeups.wait_gone(("ns", "db")), timeout=0.1)

    run(scenario())  # a daemon that went on (as before) would time out here
    assert released(api) == [("release_finalizer", "ns", "db", "7", [OTHER])]


def test_at_start_up_the_databases_marked_for_deletion_in_managed_namespaces_being_deleted_are_let_go() -> None:
    api = FakeApi()
    for namespace in ("team-a", "team-b", "other"):
        api.databases[(namespace, "db")] = {**database(deleting=True),
                                            "metadata": {**database(deleting=True)["metadata"], "namespace": namespace}}
    api.databases[("team-a", "kept")] = {"metadata": {**database(deleting=False)["metadata"], "name": "kept",
                                                      "namespace": "team-a"}}
    api.terminating.update({"team-a", "other"})  # team-b is not being deleted: kopf handles its deletion
    run(let_go_in_deleted_namespaces(api, ["team-*"]))
    assert released(api) == [("release_finalizer", "team-a", "db", "7", [OTHER])]


def test_a_start_up_that_cannot_list_namespaces_goes_on() -> None:
    api = FakeApi()
    api.failing["terminating_namespaces"] = ApiException(status=403, reason="Forbidden")
    run(let_go_in_deleted_namespaces(api, ["team-*"]))
    assert released(api) == []


def test_events_are_not_posted_into_a_namespace_being_deleted() -> None:
    """The API server refuses new Events there (kopf retried each nine times, an ERROR line a try)."""
    api = FakeApi()
    runtime = make_runtime(FakeHelm(), api=api)
    events = [("Warning", "Degraded", "1 of 2 pods ready")]
    assert run(events_to_post(runtime, "ns", events)) == events
    api.terminating.add("ns")
    assert run(events_to_post(runtime, "ns", events)) == []
    assert run(events_to_post(runtime, "ns", [])) == []
    reads = len(api.reads)
    run(events_to_post(runtime, "other", []))
    assert len(api.reads) == reads, "no Events, no read"
    api.failing["namespace_terminating"] = ApiException(status=500, reason="Internal Server Error")
    assert run(events_to_post(runtime, "ns", events)) == events, "a read that fails posts them"
