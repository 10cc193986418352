"""The last time the operator saw the primary serve: its WAL position, timeline and streaming replicas. Pure.

A failover's lag limit is only as good as the position it is judged against.
The last status is no such figure: it may be a minute old, and it loses the
servers' answers while none can be asked. So every pass keeps, in memory, what
the recorded primary itself last said while it was one, with the time it said
it; a failover judges each replica against that, and only when it was read
shortly before the primary stopped serving (policy/candidates.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .. import names
from .instances import InstanceFacts, Probe

STREAMING = "streaming"


@dataclass(frozen=True)
class Sighting:
    """The recorded primary, answering as a primary, at one moment."""

    pod: str
    at: datetime  # when it answered
    lsn: int  # its current WAL position then
    timeline: int | None
    # The replicas its pg_stat_replication listed as streaming then, with the WAL each had flushed.
    streaming: Mapping[str, int] = field(default_factory=dict)


def sighting_of(primary: str, probes: Mapping[str, Probe], now: datetime) -> Sighting | None:
    """What PRIMARY said now, when it answered as a primary; None otherwise."""
    facts = probes.get(primary)
    if not isinstance(facts, InstanceFacts) or facts.in_recovery:
        return None
    streaming = {s.name: s.flush_lsn or 0 for s in facts.standbys if s.state == STREAMING}
    return Sighting(primary, now, facts.wal_lsn, facts.timeline, streaming)


def latest(known: Sighting | None, seen: Sighting | None) -> Sighting | None:
    """The sighting to keep: the new one, else the known one (kept through a failover: the choice of the
    replica to promote is checked against the old primary's until the new one answers)."""
    return seen if seen is not None else known


# Timelines whose archive position is kept: a few failovers in a row, not a history.
ARCHIVED_TIMELINES = 3


def archived_by_timeline(known: Mapping[int, int], seen: Sighting | None) -> dict[int, int]:
    """The WAL the archive confirmed on each recent timeline, as the primaries said (a failover's new timeline
    may fork off before it: policy/archive.forked_behind_archive), with SEEN's figure added."""
    found = dict(known)
    flush = seen.streaming.get(names.ARCHIVE_APPLICATION_NAME) if seen is not None else None
    if seen is not None and seen.timeline is not None and flush:
        found[seen.timeline] = max(found.get(seen.timeline, 0), flush)
    return {timeline: found[timeline] for timeline in sorted(found)[-ARCHIVED_TIMELINES:]}
