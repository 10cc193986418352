"""How long a database waits before its next try after failures in a row. Pure."""

from __future__ import annotations

from dataclasses import dataclass

BACKOFF_FIRST, BACKOFF_MAX = 5.0, 300.0


def retry_delay(failures: int) -> float:
    """5 s, 10 s, 20 s, ... up to 300 s after the 1st, 2nd, 3rd ... failure in a row."""
    return min(BACKOFF_FIRST * 2.0 ** (failures - 1), BACKOFF_MAX)


@dataclass
class Backoff:
    """One database's failures in a row: each failure lengthens the wait, a success resets it."""

    failures: int = 0

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next try."""
        self.failures += 1
        return retry_delay(self.failures)

    def succeeded(self) -> None:
        self.failures = 0
