"""The informer thread: a failure of any shape unsyncs its kind and lists again; the thread lives on. A pattern's
namespaces are followed: informers in each that matches, none cluster-wide."""

from __future__ import annotations

import json
import re
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.informers import NAMESPACES_PATH, Informer, NamespaceFollower, start_informers
from mydb_operator.cluster.watched_kinds import KINDS

LISTING = json.dumps({"metadata": {"resourceVersion": "5"}, "items": []}).encode()


class WatchResponse:
    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    def __iter__(self) -> Any:
        return iter(self.lines)

    def release_conn(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("event", [b'{"type": "ADDED", "object": {}}', b'{"type": "ADDED", "object": null}',
                                   b"not json"], ids=["no-metadata", "null-object", "not-json"])
def test_a_malformed_watch_event_unsyncs_the_kind_and_the_thread_lists_again(event: bytes) -> None:
    class Connection:
        """The informer's connection: a listing, then a watch that sends EVENT."""

        def request(self, method: str, path: str, *, query: dict[str, Any], **_: Any) -> Any:
            return WatchResponse([event]) if query.get("watch") else SimpleNamespace(data=LISTING)

    delivered: list[str] = []

    def deliver(step: Any, *_: Any) -> None:
        delivered.append(step.__name__)
        if step.__name__ == "unsync":
            informer.stop()  # seen: let the thread end instead of listing again after its back-off

    informer = Informer("pods", None, ChildStore(on_change=lambda *_: None), deliver, Connection())  # type: ignore[arg-type]
    informer.start()
    informer.join(5)
    assert not informer.is_alive()
    assert delivered == ["replace", "unsync"]


class Blocking(WatchResponse):
    """A watch that sends its lines, then holds the connection until shut down, as the API server does."""

    def __init__(self, lines: list[bytes]) -> None:
        super().__init__(lines)
        self.closed = threading.Event()

    def __iter__(self) -> Any:
        yield from self.lines
        self.closed.wait(5)

    def shutdown(self) -> None:
        self.closed.set()


def namespace_event(kind: str, name: str) -> bytes:
    return json.dumps({"type": kind, "object": {"metadata": {"name": name, "resourceVersion": "7"}}}).encode()


def test_a_pattern_follows_its_namespaces_as_they_come_and_go() -> None:
    """`-n "team-*"`: informers list and watch in each matching namespace, never cluster-wide; a deleted one's stop
    and the store forgets it; a namespace that appears later gets its own."""
    paths: list[str] = []
    lock = threading.Lock()
    later = [namespace_event("ADDED", "team-c"), namespace_event("ADDED", "other"),
             namespace_event("DELETED", "team-a")]

    class Connection:
        def dedicated(self) -> Connection:
            return self

        def request(self, method: str, path: str, *, query: dict[str, Any], **_: Any) -> Any:
            with lock:
                paths.append(path + (" watch" if query.get("watch") else ""))
            if path == NAMESPACES_PATH:
                names = ["team-a", "team-b", "kube-system"]
                listing = {"metadata": {"resourceVersion": "5"}, "items": [{"metadata": {"name": n}} for n in names]}
                return Blocking(later) if query.get("watch") else SimpleNamespace(data=json.dumps(listing).encode())
            return Blocking([]) if query.get("watch") else SimpleNamespace(data=LISTING)

    delivered: list[tuple[str, Any]] = []

    def deliver(step: Any, *args: Any) -> None:
        with lock:
            delivered.append((step.__name__, args[:2] if step.__name__ == "replace" else args))

    threads = start_informers(ChildStore(on_change=lambda *_: None), ["team-*"], deliver, Connection())  # type: ignore[arg-type]
    [follower] = threads
    assert isinstance(follower, NamespaceFollower)
    assert follower.first_listing.wait(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and ("forget", ("team-a",)) not in delivered:
        time.sleep(0.01)
    assert sorted(follower.followed()) == ["team-b", "team-c"]
    follower.stop()
    with lock:
        listed = {args for step, args in delivered if step == "replace"}
        forgotten = [args for step, args in delivered if step == "forget"]
        namespaced = {match.group(1) for p in paths for match in [re.search(r"/namespaces/([^/ ]+)/", p)] if match}
    assert listed == {(kind, ns) for kind in KINDS for ns in ("team-a", "team-b", "team-c")}
    assert forgotten == [("team-a",)]
    assert not any(p.split(" ")[0] in {KINDS[kind].path(None) for kind in KINDS} for p in paths)  # nothing cluster-wide
    assert namespaced == {"team-a", "team-b", "team-c"}
