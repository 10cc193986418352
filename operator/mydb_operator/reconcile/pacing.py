"""Pacing first installs: at most a few new databases between Helm's install and their pods ready.

A hundred databases created at once all reach Helm within seconds; their pods
then queue behind each other in the StatefulSet controller and the scheduler,
and every database is Ready late, near the last one. With a window, the first
ones come up at once and the rest follow as places free up: the same total
time, a much earlier median (docs/benchmarks.md). A database that is not ready
after `hold_seconds` leaves its place anyway: a broken one slows the others
down but never stops them, and where real pods take long to start (initdb, a
replica's base backup) at least `size` databases start every 30 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

Key = tuple[str, str]  # (namespace, name)


class RolloutWindow:
    """Places for databases rolling out their first install. Touched only from the event loop."""

    def __init__(self, size: int, hold_seconds: float = 30.0):
        self.size = size  # 0: no pacing
        self.hold_seconds = hold_seconds
        self._until: dict[Key, float] = {}  # who holds a place, and until when at the latest
        self._freed = asyncio.Event()

    def holders(self) -> int:
        self._expire()
        return len(self._until)

    async def enter(self, key: Key) -> None:
        """Wait for a place (none needed when the window is off or `key` holds one already)."""
        while self.size and key not in self._until:
            if self.holders() < self.size:
                self._until[key] = time.monotonic() + self.hold_seconds
                return
            self._freed.clear()
            next_expiry = min(self._until.values()) - time.monotonic()
            with contextlib.suppress(TimeoutError):  # a holder's time ran out: look again
                await asyncio.wait_for(self._freed.wait(), timeout=max(0.05, next_expiry))

    def leave(self, key: Key) -> None:
        """`key`'s pods are ready (or it failed, or went away): its place is free."""
        if self._until.pop(key, None) is not None:
            self._freed.set()

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
