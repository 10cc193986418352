"""The informers' cache: filing, changes that wake a database, sync state, and catching up after Helm."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.watched_kinds import KINDS
from mydb_operator.model.observation import Observation


def obj(name: str, instance: str | None = "db", version: int = 1, namespace: str = "ns", **extra: Any) -> dict:
    labels = {"app.kubernetes.io/name": "mydatabase"}
    if instance is not None:
        labels["app.kubernetes.io/instance"] = instance
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels, "resourceVersion": str(version),
                         "managedFields": [{"manager": "helm"}]}, **extra}


def synced_store(woken: list) -> ChildStore:
    store = ChildStore(on_change=lambda namespace, name: woken.append((namespace, name)))
    for kind in KINDS:
        store.replace(kind, None, [], listed_at=1)
    return store


def test_no_observation_until_every_kind_is_listed() -> None:
    store = ChildStore(on_change=lambda *_: None)
    for kind in list(KINDS)[:-1]:
        store.replace(kind, None, [])
    assert store.observation("ns", "db") is None
    store.replace(list(KINDS)[-1], "other", [])
    assert store.observation("ns", "db") is None  # listed for another namespace only
    store.replace(list(KINDS)[-1], "ns", [])
    assert store.observation("ns", "db") == Observation()


def test_listed_waits_for_every_kind_in_every_scope() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        store = ChildStore(on_change=lambda *_: None)
        waiting = asyncio.ensure_future(store.listed(lambda: ["a", "b"], timeout=5))
        for kind in KINDS:
            store.replace(kind, "a", [])
        await asyncio.sleep(0)
        after_a = waiting.done()
        for kind in KINDS:
            store.replace(kind, "b", [])
        listed = await waiting
        return after_a, listed, await store.listed(lambda: [None], timeout=0.05)  # never listed cluster-wide

    after_a, listed, cluster_wide = asyncio.run(scenario())
    assert not after_a and listed
    assert not cluster_wide  # gave up after its timeout: reconciles read the API meanwhile


def test_a_namespace_forgotten_while_start_up_waits_for_it_is_no_longer_waited_for() -> None:
    """A make test start-up waited its whole 20 s: a namespace the follower had found was deleted before its
    informers listed it, and start-up went on waiting for those listings."""
    async def scenario() -> bool:
        store = ChildStore(on_change=lambda *_: None)
        followed = ["kept", "deleted"]
        waiting = asyncio.ensure_future(store.listed(lambda: list(followed), timeout=5))
        for kind in KINDS:
            store.replace(kind, "kept", [])
        await asyncio.sleep(0)
        assert not waiting.done()
        followed.remove("deleted")  # the follower's DELETED: its informers stop, the store forgets it
        store.forget("deleted")
        return await asyncio.wait_for(waiting, timeout=1)

    assert asyncio.run(scenario())


def test_objects_are_filed_by_instance_and_assembled_like_an_api_read() -> None:
    store = synced_store([])
    store.apply("statefulsets", "ADDED", obj("db", spec={"replicas": 3}))
    store.apply("statefulsets", "ADDED", obj("db2", instance="db2"))
    store.apply("pods", "ADDED", obj("db-1"))
    store.apply("pods", "ADDED", obj("db-0", spec={"containers": []}, status={"phase": "Running"}))
    store.apply("pods", "ADDED", obj("db2-0", instance="db2"))
    store.apply("services", "ADDED", obj("db-ro"))
    store.apply("services", "ADDED", obj("db"))
    store.apply("cronjobs", "ADDED", obj("db-backup"))
    store.apply("persistentvolumeclaims", "ADDED", obj("data-db-0"))
    store.apply("persistentvolumeclaims", "ADDED", obj("db-backups"))  # not a data claim
    store.apply("pods", "ADDED", obj("db-0", namespace="elsewhere"))
    store.apply("pods", "ADDED", obj("db-test"))  # the chart's helm test pod: not a database pod
    seen = store.observation("ns", "db")
    assert seen.statefulset["spec"]["replicas"] == 3  # what is kept of each kind: test_slimming.py
    assert "managedFields" not in seen.statefulset["metadata"]
    assert [p["metadata"]["name"] for p in seen.pods] == ["db-0", "db-1"]
    assert seen.pods[0]["status"] == {"phase": "Running"} and seen.pods[0]["spec"] == {"volumes": []}
    assert seen.services == ["db", "db-ro"]
    assert seen.cronjob["metadata"]["name"] == "db-backup"
    assert [c["metadata"]["name"] for c in seen.claims] == ["data-db-0"]


def test_changes_wake_their_database_and_repeats_do_not() -> None:
    woken: list = []
    store = synced_store(woken)
    store.apply("pods", "ADDED", obj("db-0", version=5))
    added = len(woken)
    assert added >= 1
    store.apply("pods", "MODIFIED", obj("db-0", version=5))  # the same version again (a relist, say)
    assert len(woken) == added
    store.apply("pods", "MODIFIED", obj("db-0", version=6))
    assert len(woken) > added and set(woken) == {("ns", "db")}
    before = len(woken)
    store.apply("pods", "MODIFIED", obj("db-0", version=6))
    assert len(woken) == before
    store.apply("pods", "DELETED", obj("db-0", version=7))
    assert len(woken) > before and store.observation("ns", "db").pods == []


def test_a_relabelled_object_moves_to_its_new_instance() -> None:
    store = synced_store([])
    store.apply("pods", "ADDED", obj("db-0", version=1))
    store.apply("pods", "MODIFIED", obj("db-0", instance="other", version=2))
    assert store.observation("ns", "db").pods == []
    store.apply("pods", "MODIFIED", obj("db-0", instance=None, version=3))
    assert store.observation("ns", "other").pods == []


def test_a_listing_replaces_its_scope_and_wakes_only_what_changed() -> None:
    woken: list = []
    store = synced_store(woken)
    store.apply("pods", "ADDED", obj("db-0", version=1))
    store.apply("pods", "ADDED", obj("keep-0", instance="keep", version=1))
    store.apply("pods", "ADDED", obj("x-0", instance="x", version=1, namespace="other"))
    woken.clear()
    store.replace("pods", "ns", [obj("keep-0", instance="keep", version=1), obj("new-0", instance="new", version=9)])
    assert sorted(set(woken)) == [("ns", "db"), ("ns", "new")]
    assert store.observation("ns", "db").pods == []
    assert [p["metadata"]["name"] for p in store.observation("other", "x").pods] == ["x-0"]  # other scope kept


def test_a_broken_watch_sends_reads_to_the_api_until_listed_again() -> None:
    store = synced_store([])
    store.unsync("jobs", None)
    assert store.observation("ns", "db") is None
    store.replace("jobs", None, [])
    assert store.observation("ns", "db") is not None


def test_after_helm_the_cache_waits_for_the_statefulset_the_api_showed() -> None:
    store = synced_store([])
    store.apply("statefulsets", "ADDED", obj("db", version=10))
    store.await_statefulset("ns", "db", obj("db", version=14))
    assert store.observation("ns", "db") is None  # the cache still has the rollout before Helm's
    store.apply("pods", "MODIFIED", obj("db-0", version=15))
    assert store.observation("ns", "db") is None  # other kinds do not count
    store.apply("statefulsets", "MODIFIED", obj("db", version=14))
    assert store.observation("ns", "db").statefulset["metadata"]["resourceVersion"] == "14"


def test_waiting_ends_with_a_later_listing_or_a_deletion_and_never_starts_when_caught_up() -> None:
    store = synced_store([])
    store.await_statefulset("ns", "db", obj("db", version=20))
    store.replace("statefulsets", None, [obj("db", version=20)], listed_at=25)
    assert store.observation("ns", "db") is not None
    store.await_statefulset("ns", "db", obj("db", version=30))
    store.apply("statefulsets", "DELETED", obj("db", version=31))
    assert store.observation("ns", "db") == Observation()
    store.apply("statefulsets", "ADDED", obj("db", version=40))
    store.await_statefulset("ns", "db", obj("db", version=40))
    assert store.observation("ns", "db") is not None  # the watch was first
    store.await_statefulset("ns", "db", None)  # the API shows none: nothing to wait for
    assert store.observation("ns", "db") is not None


def test_caught_up_returns_once_the_cache_is_complete_or_none_after_the_timeout() -> None:
    has_statefulset = lambda seen: seen.statefulset is not None  # noqa: E731

    async def scenario() -> tuple:
        store = synced_store([])
        store.await_statefulset("ns", "db", obj("db", version=14))
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, store.apply, "statefulsets", "ADDED", obj("db", version=12))  # older: not enough
        loop.call_later(0.10, store.apply, "statefulsets", "MODIFIED", obj("db", version=14))
        seen = await store.caught_up("ns", "db", has_statefulset, timeout=5)
        at_once = await store.caught_up("ns", "db", has_statefulset, timeout=0)
        missing = await store.caught_up("ns", "other", has_statefulset, timeout=0.1)
        return seen, at_once, missing
    seen, at_once, missing = asyncio.run(scenario())
    assert seen.statefulset["metadata"]["resourceVersion"] == "14"  # not the older version before it
    assert at_once is not None  # already complete: no wait at all
    assert missing is None


def test_cached_objects_share_their_strings() -> None:
    store = synced_store([])
    for name in ("db-0", "db-1"):  # parsed apart, as two watch events are
        store.apply("pods", "ADDED", json.loads(json.dumps(obj(name, status={"phase": "Running"}))))
    first, second = store.observation("ns", "db").pods
    assert first["status"]["phase"] is second["status"]["phase"]
    assert next(iter(first["status"])) is next(iter(second["status"]))


def test_a_forgotten_namespace_loses_its_objects_and_its_sync_and_the_others_keep_theirs() -> None:
    woken: list = []
    store = ChildStore(on_change=lambda namespace, name: woken.append((namespace, name)))
    for namespace in ("gone", "kept"):
        for kind in KINDS:
            store.replace(kind, namespace, [obj("db-0", namespace=namespace)] if kind == "pods" else [])
    woken.clear()
    store.forget("gone")
    assert woken == [("gone", "db")]  # its database wakes (and finds its namespace gone)
    assert store.observation("gone", "db") is None  # reads go to the API until informers list it again
    assert store.observation("kept", "db") is not None and store.observation("kept", "db").pods
