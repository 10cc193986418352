"""What the operator remembers of each database's primary between passes: its last answer, the failover clock.

Memory only, on purpose: an operator that starts again knows nothing it did not
read itself, so it waits failoverDelay again and judges no lag on a figure it
did not read (policy/candidates.py). Touched only from the event loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..model.lease import LeaseSighting
from ..model.sighting import Sighting, archived_by_timeline

Key = tuple[str, str]  # (namespace, name)


@dataclass
class PrimaryWatch:
    sighting: Sighting | None = None  # the recorded primary's last answer as a primary
    watching_since: datetime | None = None  # when a pass first saw it down while a replica could take over
    archived: dict[int, int] = field(default_factory=dict)  # timeline -> the WAL the archive confirmed on it
    lease: LeaseSighting | None = None  # the primary lease as last read, and since when it is so

    def saw(self, sighting: Sighting | None) -> None:
        """Keep SIGHTING (None: the primary did not answer as one; the last one stays) and its archive figure."""
        self.sighting = sighting
        self.archived = archived_by_timeline(self.archived, sighting)


class PrimaryWatches:
    def __init__(self) -> None:
        self._by_key: dict[Key, PrimaryWatch] = {}

    def of(self, key: Key) -> PrimaryWatch:
        return self._by_key.setdefault(key, PrimaryWatch())

    def forget(self, key: Key) -> None:
        self._by_key.pop(key, None)
