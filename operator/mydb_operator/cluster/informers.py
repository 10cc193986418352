"""Informers: list, then watch, each kind the chart renders; every change goes to the ChildStore."""

from __future__ import annotations

import json
import logging
import threading
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


class _Expired(Exception):
    """410 Gone: the watch's resourceVersion is too old; list again."""


class Informer(threading.Thread):
    """List, then watch, one kind in one namespace (or all); hand every change to the store.

    Runs in its own thread with a connection of its own (a watch holds one for
    minutes: `Connection.dedicated()`); `deliver` puts each store update on the event loop."""

    def __init__(
        self,
        kind: str,
        namespace: str | None,
        store: ChildStore,
        deliver: Callable[..., None],
        connection: Connection,
        wanted: Callable[[str], bool] = lambda _: True,
    ):
        super().__init__(name=f"informer-{kind}-{namespace or 'all'}", daemon=True)
        self._connection = connection
        self._path = KINDS[kind].path(namespace)
        self.kind, self.scope, self._store, self._deliver = kind, namespace, store, deliver
        self._wanted = wanted  # the namespaces whose objects are cached (a cluster-wide watch sees all)
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
                self._deliver(self._store.unsync, self.kind, self.scope)
                delay = backoff.failed()
                reason = f"Api{error.status}" if isinstance(error, ApiException) else type(error).__name__
                log.warning(
                    "watching %s: %s (list again in %.0fs; reads go to the API meanwhile)", self.kind, reason, delay
                )
                self._stopping.wait(delay)

    def _relist(self) -> str:
        listing = json.loads(self._connection.request("GET", self._path, query={"labelSelector": SELECTOR}).data)
        version: str = listing["metadata"]["resourceVersion"]
        items = [item for item in listing["items"] if self._wanted(item["metadata"]["namespace"])]
        self._deliver(self._store.replace, self.kind, self.scope, items, version_of(listing))
        return version

    def _watch(self, version: str) -> str:
        """One watch request, until the server ends it; returns the last resourceVersion seen."""
        query = {
            "labelSelector": SELECTOR,
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
                if event["type"] != "BOOKMARK" and self._wanted(event["object"]["metadata"]["namespace"]):
                    self._deliver(self._store.apply, self.kind, event["type"], event["object"])
        finally:
            self._response.release_conn()
            self._response = None
        return version


def informer_scopes(namespaces: list[str]) -> list[str | None]:
    """Where the informers list: each named namespace, else all (None) for no -n or a pattern among them."""
    return [None] if not namespaces or any_pattern(namespaces) else list(namespaces)


def start_informers(
    store: ChildStore, namespaces: list[str], deliver: Callable[..., Any], api: Connection
) -> list[Informer]:
    """One informer per kind, cluster-wide, or per kind and namespace when the operator is limited to some
    by name (with a pattern: cluster-wide, caching only the namespaces it matches); each on a connection
    of its own, with the configuration of API's (the port's) client."""
    informers = [
        Informer(kind, scope, store, deliver, api.dedicated(), wanted=lambda ns: managed(namespaces, ns))
        for kind in KINDS
        for scope in informer_scopes(namespaces)
    ]
    for informer in informers:
        informer.start()
    return informers
