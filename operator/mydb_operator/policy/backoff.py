"""How long a database waits before its next try after failures in a row. Pure."""

from __future__ import annotations

BACKOFF_FIRST, BACKOFF_MAX = 5.0, 300.0


def retry_delay(failures: int) -> float:
    """5 s, 10 s, 20 s, ... up to 300 s after the 1st, 2nd, 3rd ... failure in a row."""
    return min(BACKOFF_FIRST * 2.0 ** (failures - 1), BACKOFF_MAX)
