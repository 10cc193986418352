"""A live copy of every database's children, kept by list + watch (informers).

Reconciles read this cache instead of the API: with a few hundred databases
the per-reconcile lists were most of the operator's API traffic and much of
its CPU, and the API server had to filter every namespace's pods for each.
Each change also wakes the database it belongs to, which is why the watches
exist at all. Before acting (running Helm, growing claims) the reconciler
still reads the API, so a cache a few milliseconds behind never causes work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from typing import Any, Callable

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import api
from .observe import Object, Observation, assemble

log = logging.getLogger(__name__)

# kind -> (API group class, the kind's name in the client's method names)
KINDS: dict[str, tuple[type, str]] = {
    "pods": (client.CoreV1Api, "pod"),
    "services": (client.CoreV1Api, "service"),
    "persistentvolumeclaims": (client.CoreV1Api, "persistent_volume_claim"),
    "statefulsets": (client.AppsV1Api, "stateful_set"),
    "cronjobs": (client.BatchV1Api, "cron_job"),
    "jobs": (client.BatchV1Api, "job"),
}
# Only what the bundled chart labels: the API server filters, so other pods never reach us.
SELECTOR = f"{api.NAME_LABEL}={api.CHART_NAME},{api.INSTANCE_LABEL}"
WATCH_SECONDS = 300
Key = tuple[str, str]  # (namespace, name)


# Parts no reconcile reads (status.py, lifecycle.py, backups.py and drift() look at pod and Job
# status, Service names, and whole StatefulSets, CronJobs and claims): not kept, to keep memory
# flat at hundreds of databases. A fresh API read before acting has whole objects anyway.
UNREAD = {"pods": ("spec",), "jobs": ("spec",), "services": ("spec", "status")}


def shared_strings(value: Any) -> Any:
    """The same data with its keys and short strings interned: thousands of cached objects
    then share one copy of "metadata", "Ready", "True" ... instead of one each (half the memory)."""
    if isinstance(value, dict):
        return {sys.intern(k): shared_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared_strings(v) for v in value]
    if isinstance(value, str) and len(value) <= 64:
        return sys.intern(value)
    return value


def slim(kind: str, obj: Object) -> Object:
    """The object as cached: without managedFields (the largest part of a server-side applied
    object) and the kind's UNREAD parts, its strings shared."""
    kept = {k: v for k, v in obj.items() if k not in UNREAD.get(kind, ())}
    kept["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return shared_strings(kept)


def instance_of(obj: Object) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(api.INSTANCE_LABEL)


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
        return self._objects[kind][(key[0], instance)][key[1]]["metadata"].get("resourceVersion")

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
        if kind == "statefulsets":
            for key in [k for k in self._awaited if scope is None or k[0] == scope]:
                self._reached(key, listed_at)

    def apply(self, kind: str, event_type: str, obj: Object) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if kind == "statefulsets":
            self._reached((key[0], instance_of(obj) or ""), version_of(obj))
        if event_type == "DELETED":
            self._drop(kind, key)
        elif self._version(kind, key) != obj["metadata"].get("resourceVersion"):
            self._put(kind, obj)

    def unsync(self, kind: str, scope: str | None) -> None:
        """The watch broke: answer from the API until the next full listing."""
        self._synced.discard((kind, scope))

    def synced(self, namespace: str) -> bool:
        return all((kind, None) in self._synced or (kind, namespace) in self._synced for kind in KINDS)

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

    async def caught_up(self, namespace: str, release: str, complete: Callable[[Observation], bool],
                        timeout: float) -> Observation | None:
        """The cache's observation once `complete` holds for it, or None if that takes over `timeout` s."""
        key = (namespace, release)
        waiter = self._waiting[key] = asyncio.Event()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    waiter.clear()  # set again by the next change to this database
                    seen = self.observation(release, namespace)
                    if seen is not None and complete(seen):
                        return seen
                    await waiter.wait()
        except TimeoutError:
            return None
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]

    def observation(self, release: str, namespace: str) -> Observation | None:
        """What the cache knows of one database, or None while it cannot know everything."""
        if not self.synced(namespace):
            return None

        def filed(kind: str) -> list[Object]:
            return list(self._objects[kind].get((namespace, release), {}).values())
        if (namespace, release) in self._awaited:
            return None
        return assemble(release, statefulsets=filed("statefulsets"), pods=filed("pods"), cronjobs=filed("cronjobs"),
                        jobs=filed("jobs"), services=filed("services"), claims=filed("persistentvolumeclaims"))


class _Expired(Exception):
    """410 Gone: the watch's resourceVersion is too old; list again."""


class Informer(threading.Thread):
    """List, then watch, one kind in one namespace (or all); hand every change to the store.

    Runs in its own thread with its own API client (a watch holds a connection
    for minutes); `deliver` puts each store update on the event loop."""

    def __init__(self, kind: str, namespace: str | None, store: ChildStore,
                 deliver: Callable[..., None]):
        super().__init__(name=f"informer-{kind}-{namespace or 'all'}", daemon=True)
        group, singular = KINDS[kind]
        resource_api = group(client.ApiClient())
        if namespace is None:
            self._list, self._args = getattr(resource_api, f"list_{singular}_for_all_namespaces"), ()
        else:
            self._list, self._args = getattr(resource_api, f"list_namespaced_{singular}"), (namespace,)
        self.kind, self.scope, self._store, self._deliver = kind, namespace, store, deliver
        self._stopping = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            response.shutdown()  # unblocks the watch's read at once

    def run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                version = self._relist()
                failures = 0
                while not self._stopping.is_set():
                    version = self._watch(version)
            except _Expired:
                continue
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
                if self._stopping.is_set():
                    return
                self._deliver(self._store.unsync, self.kind, self.scope)
                failures += 1
                delay = min(2 ** failures, 30)
                reason = f"Api{error.status}" if isinstance(error, ApiException) else type(error).__name__
                log.warning("watching %s: %s (list again in %ds; reads go to the API meanwhile)",
                            self.kind, reason, delay)
                self._stopping.wait(delay)

    def _relist(self) -> str:
        listing = json.loads(self._list(*self._args, label_selector=SELECTOR, _preload_content=False).data)
        version = listing["metadata"]["resourceVersion"]
        self._deliver(self._store.replace, self.kind, self.scope, listing["items"], version_of(listing))
        return version

    def _watch(self, version: str) -> str:
        """One watch request, until the server ends it; returns the last resourceVersion seen."""
        self._response = self._list(
            *self._args, label_selector=SELECTOR, watch=True, resource_version=version,
            allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS, _preload_content=False,
            _request_timeout=(30, WATCH_SECONDS + 30))
        try:
            for line in self._response:
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    if status.get("code") == 410:
                        raise _Expired()
                    raise ApiException(status=status.get("code"), reason=status.get("message"))
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    self._deliver(self._store.apply, self.kind, event["type"], event["object"])
        finally:
            self._response.release_conn()
            self._response = None
        return version


def start_informers(store: ChildStore, namespaces: list[str], deliver: Callable[..., Any]) -> list[Informer]:
    """One informer per kind, cluster-wide, or per kind and namespace when the operator is limited to some."""
    scopes: list[str | None] = list(namespaces) or [None]
    informers = [Informer(kind, scope, store, deliver) for kind in KINDS for scope in scopes]
    for informer in informers:
        informer.start()
    return informers
