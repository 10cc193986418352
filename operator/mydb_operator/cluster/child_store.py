"""A live copy of every database's children, filled by the informers (cluster/informers.py).

Reconciles read this cache instead of the API: with a few hundred databases
the per-reconcile lists were most of the operator's API traffic and much of
its CPU, and the API server had to filter every namespace's pods for each.
Each change also wakes the database it belongs to, which is why the watches
exist at all. Before acting (running Helm, growing claims) the reconciler
still reads the API, so a cache a few milliseconds behind never causes work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .. import names
from ..model.observation import Object, Observation, assemble
from .slimming import slim
from .watched_kinds import KINDS

Key = tuple[str, str]  # (namespace, name)


def instance_of(obj: Object) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(names.INSTANCE_LABEL)


def version_of(obj: Object | dict[str, Any]) -> int:
    """resourceVersion as a number (etcd's revision): a later write has a larger one."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class ChildStore:
    """The cache, indexed by (namespace, instance label). Touched only from the event loop."""

    def __init__(self, on_change: Callable[[str, str], None]):
        self._objects: dict[str, dict[Key, dict[str, Object]]] = {kind: {} for kind in KINDS}
        self._instance: dict[str, dict[Key, str]] = {kind: {} for kind in KINDS}  # where each object is filed
        self._synced: set[tuple[str, str | None]] = set()  # (kind, namespace or None for all)
        self._listing = asyncio.Event()  # set by every full listing: start-up waits on it in listed()
        # (namespace, instance) -> the StatefulSet resourceVersion a fresh API read saw after Helm
        # applied: until the watch delivers it, the cache would report the rollout before it as current.
        self._awaited: dict[Key, int] = {}
        self._waiting: dict[Key, asyncio.Event] = {}  # reconciles waiting in caught_up()
        self._on_change = on_change

    def _changed(self, namespace: str, instance: str) -> None:
        self._on_change(namespace, instance)
        waiter = self._waiting.get((namespace, instance))
        if waiter is not None:
            waiter.set()

    def _put(self, kind: str, obj: Object) -> None:
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        self._drop(kind, (namespace, name))
        instance = instance_of(obj)
        if instance is None:
            return
        self._objects[kind].setdefault((namespace, instance), {})[name] = slim(kind, obj)
        self._instance[kind][(namespace, name)] = instance
        self._changed(namespace, instance)

    def _drop(self, kind: str, key: Key) -> None:
        namespace, name = key
        instance = self._instance[kind].pop(key, None)
        if instance is None:
            return
        filed = self._objects[kind][(namespace, instance)]
        del filed[name]
        if not filed:
            del self._objects[kind][(namespace, instance)]
        self._changed(namespace, instance)

    def _version(self, kind: str, key: Key) -> str | None:
        instance = self._instance[kind].get(key)
        if instance is None:
            return None
        version: str | None = self._objects[kind][(key[0], instance)][key[1]]["metadata"].get("resourceVersion")
        return version

    def replace(self, kind: str, scope: str | None, items: list[Object], listed_at: int = 0) -> None:
        """A full listing of `kind` in namespace `scope` (None: all), as of resourceVersion `listed_at`.

        Only real changes wake anyone."""
        listed = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}
        for key in [k for k in self._instance[kind] if scope is None or k[0] == scope]:
            if key not in listed:
                self._drop(kind, key)
        for key, obj in listed.items():
            if self._version(kind, key) != obj["metadata"].get("resourceVersion"):
                self._put(kind, obj)
        self._synced.add((kind, scope))
        self._listing.set()
        if kind == "statefulsets":
            for key in [k for k in self._awaited if scope is None or k[0] == scope]:
                self._reached(key, listed_at)

    def apply(self, kind: str, event_type: str, obj: Object) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if kind == "statefulsets" and key[1] == instance_of(obj):  # the database's, not its archive's
            self._reached((key[0], key[1]), version_of(obj))
        if event_type == "DELETED":
            self._drop(kind, key)
        elif self._version(kind, key) != obj["metadata"].get("resourceVersion"):
            self._put(kind, obj)

    def unsync(self, kind: str, scope: str | None) -> None:
        """The watch broke: answer from the API until the next full listing."""
        self._synced.discard((kind, scope))

    def forget(self, namespace: str) -> None:
        """The namespace is gone and its informers have stopped: drop its objects; reads in a namespace of
        that name go to the API until informers list it again."""
        for kind in KINDS:
            for key in [k for k in self._instance[kind] if k[0] == namespace]:
                self._drop(kind, key)
            self._synced.discard((kind, namespace))
        self._listing.set()  # start-up may have been waiting for this namespace's listings

    def synced(self, namespace: str | None) -> bool:
        return all((kind, None) in self._synced or (kind, namespace) in self._synced for kind in KINDS)

    async def listed(
        self,
        scopes: Callable[[], list[str | None]],
        timeout: float,  # noqa: ASYNC109 (running out of time is an answer: reconciles then read the API)
    ) -> bool:
        """Wait until every kind has been listed in every scope (None: all namespaces) that `scopes()` names
        as it is asked again after each listing or forgotten namespace (one deleted meanwhile is no longer
        waited for); False if that takes over `timeout` s. At start-up: a database reconciled before this
        would read its children from the API, a request per database where the listing is one per kind."""
        try:
            async with asyncio.timeout(timeout):
                while not all(self.synced(scope) for scope in scopes()):
                    self._listing.clear()
                    await self._listing.wait()
        except TimeoutError:
            return False
        return True

    def _reached(self, key: Key, version: int) -> None:
        if key in self._awaited and version >= self._awaited[key]:
            del self._awaited[key]
            self._changed(*key)

    def await_statefulset(self, namespace: str, release: str, statefulset: Object | None) -> None:
        """The API just showed this StatefulSet (or none): the cache is behind until it has caught up."""
        key = (namespace, release)
        self._awaited.pop(key, None)
        cached = self._objects["statefulsets"].get(key, {}).get(release)
        if statefulset is None:
            return  # nothing newer to wait for; a deletion shows up as one more event
        if cached is None or version_of(cached) < version_of(statefulset):
            self._awaited[key] = version_of(statefulset)

    async def caught_up(
        self,
        namespace: str,
        release: str,
        complete: Callable[[Observation], bool],
        timeout: float,  # noqa: ASYNC109 (running out of time is an answer, None: the caller reads the API)
    ) -> Observation | None:
        """The cache's observation once `complete` holds for it, or None if that takes over `timeout` s."""
        key = (namespace, release)
        waiter = self._waiting[key] = asyncio.Event()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    waiter.clear()  # set again by the next change to this database
                    seen = self.observation(namespace, release)
                    if seen is not None and complete(seen):
                        return seen
                    await waiter.wait()
        except TimeoutError:
            return None
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]

    def observation(self, namespace: str, release: str) -> Observation | None:
        """What the cache knows of one database, or None while it cannot know everything."""
        if not self.synced(namespace):
            return None

        def filed(kind: str) -> list[Object]:
            return list(self._objects[kind].get((namespace, release), {}).values())

        if (namespace, release) in self._awaited:
            return None
        return assemble(
            release,
            statefulsets=filed("statefulsets"),
            pods=filed("pods"),
            cronjobs=filed("cronjobs"),
            jobs=filed("jobs"),
            services=filed("services"),
            claims=filed("persistentvolumeclaims"),
            configmaps=filed("configmaps"),
            endpointslices=filed("endpointslices"),
        )
