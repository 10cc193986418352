"""Informers: list, then watch, each kind the chart renders; every change goes to the ChildStore.

An operator given namespace patterns (`-n "team-*"`) follows the namespaces instead: informers start in each
namespace that matches as it appears and stop once it is gone, so the API server sends it only those
namespaces' objects. One cluster-wide watch per kind would send every chart object of the cluster, each
decoded only to be dropped: with eight operators of the tests' kind, most of their CPU."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from ..model.namespaces import any_pattern, managed
from ..policy.backoff import Backoff
from .child_store import ChildStore, version_of
from .clients import Connection
from .failures import API_FAILURES
from .watched_kinds import KINDS, SELECTOR

log = logging.getLogger(__name__)
WATCH_SECONDS = 300
# A broken watch lists again after 2 s, 4 s, 8 s, 16 s, then every 30 s while it keeps failing.
RELIST_FIRST, RELIST_CEILING = 2.0, 30.0
# An event not shaped as documented: like an API failure, it must not end the thread,
# which would leave the kind marked synced with its cache frozen.
MALFORMED = (ValueError, KeyError, TypeError)
NAMESPACES_PATH = "/api/v1/namespaces"


class _Expired(Exception):
    """410 Gone: the watch's resourceVersion is too old; list again."""


class ListWatch(threading.Thread):
    """List, then watch from the listing's version, in its own thread with a connection of its own (a watch
    holds one for minutes: `Connection.dedicated()`); list again when the watch's version is too old, after a
    back-off when the API fails. Subclasses say what a listing and an event mean."""

    what = "objects"

    def __init__(self, name: str, path: str, selector: str | None, connection: Connection):
        super().__init__(name=name, daemon=True)
        self._path, self._selector, self._connection = path, selector, connection
        self._stopping = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            response.shutdown()  # unblocks the watch's read at once

    def run(self) -> None:
        backoff = Backoff(first=RELIST_FIRST, ceiling=RELIST_CEILING)
        while not self._stopping.is_set():
            try:
                version = self._relist()
                backoff.succeeded()
                while not self._stopping.is_set():
                    version = self._watch(version)
            except _Expired:
                continue
            except (*API_FAILURES, *MALFORMED) as error:
                if self._stopping.is_set():
                    return
                self._failed()
                delay = backoff.failed()
                reason = f"Api{error.status}" if isinstance(error, ApiException) else type(error).__name__
                log.warning("watching %s: %s (list again in %.0fs)", self.what, reason, delay)
                self._stopping.wait(delay)

    def _query(self) -> dict[str, Any]:
        return {"labelSelector": self._selector} if self._selector else {}

    def _relist(self) -> str:
        listing = json.loads(self._connection.request("GET", self._path, query=self._query()).data)
        version: str = listing["metadata"]["resourceVersion"]
        self._listed(listing)
        return version

    def _watch(self, version: str) -> str:
        """One watch request, until the server ends it; returns the last resourceVersion seen."""
        query = {
            **self._query(),
            "watch": True,
            "resourceVersion": version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": WATCH_SECONDS,
        }
        self._response = self._connection.request("GET", self._path, query=query, timeout=(30, WATCH_SECONDS + 30))
        try:
            for line in self._response:
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    if status.get("code") == 410:
                        raise _Expired()
                    raise ApiException(status=status.get("code"), reason=status.get("message"))
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK" and not self._stopping.is_set():
                    self._event(event["type"], event["object"])
        finally:
            self._response.release_conn()
            self._response = None
        return version

    def _listed(self, listing: dict[str, Any]) -> None:
        raise NotImplementedError

    def _event(self, event_type: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _failed(self) -> None:
        """The watch broke (before its back-off)."""


class Informer(ListWatch):
    """One kind in one namespace (or all): every change goes to the store, which `deliver` updates on the
    event loop; while the watch is broken the kind is unsynced there, and reads go to the API."""

    def __init__(
        self, kind: str, namespace: str | None, store: ChildStore, deliver: Callable[..., None], connection: Connection
    ):
        super().__init__(f"informer-{kind}-{namespace or 'all'}", KINDS[kind].path(namespace), SELECTOR, connection)
        self.kind, self.scope, self._store, self._deliver = kind, namespace, store, deliver
        self.what = kind

    def _listed(self, listing: dict[str, Any]) -> None:
        self._deliver(self._store.replace, self.kind, self.scope, listing["items"], version_of(listing))

    def _event(self, event_type: str, obj: dict[str, Any]) -> None:
        if "namespace" not in obj["metadata"]:  # malformed: fail here, in the thread, not in the store's loop
            raise KeyError("metadata.namespace")
        self._deliver(self._store.apply, self.kind, event_type, obj)

    def _failed(self) -> None:
        self._deliver(self._store.unsync, self.kind, self.scope)


class NamespaceFollower(ListWatch):
    """The namespaces that `-n` patterns match: as each appears, one informer per kind in it; once it is
    gone (deleted, not merely terminating: its databases are still being let go), its informers stop and
    the store forgets its objects."""

    what = "namespaces"

    def __init__(self, namespaces: list[str], store: ChildStore, deliver: Callable[..., None], api: Connection):
        super().__init__("informers-namespaces", NAMESPACES_PATH, None, api.dedicated())
        self._values, self._store, self._deliver, self._api = namespaces, store, deliver, api
        self._informers: dict[str, list[Informer]] = {}
        self._lock = threading.Lock()  # the namespaces followed, read by start-up from the event loop
        self.first_listing = threading.Event()

    def followed(self) -> list[str]:
        with self._lock:
            return list(self._informers)

    def stop(self) -> None:
        super().stop()
        with self._lock:
            for informers in self._informers.values():
                for informer in informers:
                    informer.stop()

    def _listed(self, listing: dict[str, Any]) -> None:
        present = {item["metadata"]["name"] for item in listing["items"]}
        for namespace in set(self.followed()) - present:
            self._forget(namespace)
        for namespace in sorted(present):
            self._follow(namespace)
        self.first_listing.set()

    def _event(self, event_type: str, obj: dict[str, Any]) -> None:
        namespace = obj["metadata"]["name"]
        if event_type == "DELETED":
            self._forget(namespace)
        else:
            self._follow(namespace)

    def _follow(self, namespace: str) -> None:
        if self._stopping.is_set() or not managed(self._values, namespace) or namespace in self.followed():
            return
        informers = [Informer(kind, namespace, self._store, self._deliver, self._api.dedicated()) for kind in KINDS]
        with self._lock:
            self._informers[namespace] = informers
        for informer in informers:
            informer.start()

    def _forget(self, namespace: str) -> None:
        with self._lock:
            informers = self._informers.pop(namespace, [])
        for informer in informers:
            informer.stop()
        if informers:
            self._deliver(self._store.forget, namespace)


def informer_scopes(namespaces: list[str]) -> list[str | None]:
    """Where the informers list from the start: all namespaces (None) without -n, else each named one; none
    for patterns, whose namespaces a NamespaceFollower finds."""
    if any_pattern(namespaces):
        return []
    return list(namespaces) or [None]


def start_informers(
    store: ChildStore, namespaces: list[str], deliver: Callable[..., Any], api: Connection
) -> list[ListWatch]:
    """One informer per kind, cluster-wide, or per kind and namespace when the operator is limited to some by
    name; with a pattern among them, the NamespaceFollower that starts them in each namespace it matches.
    Each on a connection of its own, with the configuration of API's (the port's) client."""
    scopes = informer_scopes(namespaces)
    threads: list[ListWatch] = [
        Informer(kind, scope, store, deliver, api.dedicated()) for kind in KINDS for scope in scopes
    ]
    if any_pattern(namespaces):
        threads.append(NamespaceFollower(namespaces, store, deliver, api))
    for thread in threads:
        thread.start()
    return threads


async def first_listings(
    store: ChildStore,
    threads: list[ListWatch],
    namespaces: list[str],
    timeout: float,  # noqa: ASYNC109 (running out of time is an answer, as in ChildStore.listed)
) -> bool:
    """Wait until every kind is listed where the operator starts with it, and in the namespaces a follower
    follows once it has listed them (not one deleted meanwhile, whose informers stopped unlisted); False after
    `timeout` s (reconciles read the API until then)."""
    deadline = time.monotonic() + timeout
    followers = [thread for thread in threads if isinstance(thread, NamespaceFollower)]
    for follower in followers:
        if not await asyncio.to_thread(follower.first_listing.wait, timeout):
            return False

    def scopes() -> list[str | None]:
        return informer_scopes(namespaces) + [namespace for f in followers for namespace in f.followed()]

    return await store.listed(scopes, max(0.0, deadline - time.monotonic()))
