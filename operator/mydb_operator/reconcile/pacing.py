"""Pacing first installs: at most a few new databases between Helm's install and their pods ready.

A hundred databases created at once all reach Helm within seconds; their pods
then queue behind each other in the StatefulSet controller and the scheduler,
and every database is Ready late, near the last one. With a window, the first
ones come up at once and the rest follow as places free up: the same total
time, a much earlier median (docs/benchmarks.md). A database that is not ready
after `hold_seconds` leaves its place anyway: a broken one slows the others
down but never stops them, and where real pods take long to start (initdb, a
replica's base backup) at least `size` databases start every 30 s.

Places go first come, first served, and a freed place wakes exactly one
waiter: with a thousand databases waiting, waking them all on every free place
to look again was a third of the operator's CPU (docs/benchmarks.md, round 6).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

Key = tuple[str, str]  # (namespace, name)


class RolloutWindow:
    """Places for databases rolling out their first install. Touched only from the event loop."""

    def __init__(self, size: int, hold_seconds: float = 30.0):
        self.size = size  # 0: no pacing
        self.hold_seconds = hold_seconds
        self._until: dict[Key, float] = {}  # who holds a place, and until when at the latest
        self._queue: deque[tuple[Key, asyncio.Future[None]]] = deque()  # who waits, longest first
        self._expiry: asyncio.TimerHandle | None = None  # frees the earliest holder's place when its time runs out

    def holders(self) -> int:
        self._expire()
        return len(self._until)

    async def enter(self, key: Key) -> None:
        """Wait for a place (none needed when the window is off or `key` holds one already)."""
        if not self.size or key in self._until:
            return
        if not self._queue and self.holders() < self.size:
            self._hold(key)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((key, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.leave(key)  # given a place just as its database went away
            raise

    def leave(self, key: Key) -> None:
        """`key`'s pods are ready (or it failed, or went away): its place goes to the next in line."""
        if self._until.pop(key, None) is not None:
            self._admit()

    def _hold(self, key: Key) -> None:
        self._until[key] = time.monotonic() + self.hold_seconds
        if self._expiry is None:  # a new holder's time runs out after every earlier one's
            self._schedule_expiry()

    def _schedule_expiry(self) -> None:
        delay = min(self._until.values()) - time.monotonic()
        self._expiry = asyncio.get_running_loop().call_later(max(0.0, delay), self._on_expiry)

    def _admit(self) -> None:
        self._expire()
        while self._queue and len(self._until) < self.size:
            key, granted = self._queue.popleft()
            if not granted.done():  # a cancelled waiter (its database deleted) is skipped
                self._hold(key)
                granted.set_result(None)

    def _on_expiry(self) -> None:
        self._admit()
        self._expiry = None
        if self._until:
            self._schedule_expiry()

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
