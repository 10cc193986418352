"""Pokes: a change the informers or kopf saw wakes the one database it belongs to."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import kopf

from .. import names
from ..policy.backups import requested

if TYPE_CHECKING:
    from .memo import OperatorMemo

Key = tuple[str, str]  # (namespace, name)


class Wakeups:
    """One wake-up event per running daemon, by (namespace, name). Touched only from the event loop."""

    def __init__(self) -> None:
        self._events: dict[Key, asyncio.Event] = {}
        self._gone: dict[Key, asyncio.Event] = {}  # set when the key's daemon leaves (deletion waits on it)

    def poke(self, namespace: str | None, name: str | None) -> None:
        event = self._events.get((namespace or "", name or ""))
        if event is not None:
            event.set()

    def register(self, key: Key) -> asyncio.Event:
        """A wake-up of its own for a new daemon: an older daemon of the same key, still stopping,
        then no longer takes it away when it unregisters."""
        wake = self._events[key] = asyncio.Event()
        return wake

    async def wait_gone(self, key: Key) -> None:
        """Return once the database's daemon has exited: its pass done, and any Helm run in it."""
        if key in self._events:
            await self._gone.setdefault(key, asyncio.Event()).wait()

    def unregister(self, key: Key, wake: asyncio.Event) -> bool:
        """Forget the database's wake-up, unless a newer daemon for it took the key; True when forgotten."""
        if self._events.get(key) is wake:
            del self._events[key]
            gone = self._gone.pop(key, None)
            if gone is not None:
                gone.set()
            return True
        return False


async def sleep_until_poked(wake: asyncio.Event, stopped: kopf.DaemonStopped, delay: float) -> bool:
    """Sleep up to `delay`; True if poked. Returns at once when kopf stops the daemon."""
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return wake.is_set() and not stopped


@kopf.on.event(names.GROUP, names.VERSION, names.PLURAL)
def mydatabase_changed(meta: kopf.Meta, status: kopf.Status, memo: OperatorMemo, **_: Any) -> None:
    """A new generation (spec edit, kubectl scale), a backup request or a switchover request is worth an
    immediate reconcile."""
    annotations = dict(meta.get("annotations") or {})
    if (
        meta.get("generation") != status.get("observedGeneration")
        or requested(annotations, dict(status))
        or names.SWITCHOVER_ANNOTATION in annotations
    ):
        memo.wakeups.poke(meta.get("namespace"), meta.get("name"))
