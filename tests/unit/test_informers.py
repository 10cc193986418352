"""The informer thread: a failure of any shape unsyncs its kind and lists again; the thread lives on."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.informers import Informer

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
