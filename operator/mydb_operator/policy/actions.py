"""What the failover decisions ask for, in order, and where a database's primary stands. Pure.

reconcile/topology.py carries each action out; nothing here touches the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.record import PrimaryRecord

SERVING, STARTING, WAITING, FAILING_OVER, SWITCHING_OVER, STUCK = (
    "Serving",
    "Starting",
    "WaitingFailoverDelay",
    "FailingOver",
    "SwitchingOver",
    "NoEligibleReplica",
)


@dataclass(frozen=True)
class RecordPrimary:
    """Write the record: the decision, before anything acts on it."""

    record: PrimaryRecord


@dataclass(frozen=True)
class Label:
    pod: str
    role: str


@dataclass(frozen=True)
class Fence:
    """Label the pod fenced (out of both Services), then delete it (this uid only): it stops, and comes
    back as a replica of the recorded primary. grace None: the pod's own period (a clean shutdown)."""

    pod: str
    uid: str
    grace: int | None


@dataclass(frozen=True)
class Promote:
    pod: str
    # How a failover's old primary is known to take no more writes, for the Promoted Event (not what is done).
    why: str = field(default="", compare=False)


@dataclass(frozen=True)
class KeepLease:
    """Name HOLDER in the primary lease (model/lease.py), and the database's pods as its MEMBERS."""

    holder: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Repoint:
    """ALTER SYSTEM SET primary_conninfo (the same, another host) and a reload."""

    pod: str
    conninfo: str


@dataclass(frozen=True)
class CreateSlot:
    """On the primary POD: a physical replication slot for a replica, reserving WAL from now."""

    pod: str
    slot: str


@dataclass(frozen=True)
class DropSlot:
    """On the primary POD: a replica slot no pod streams through (scaled away), unless it is in use."""

    pod: str
    slot: str


@dataclass(frozen=True)
class UseSlot:
    """On the replica POD: ALTER SYSTEM SET primary_slot_name and a reload."""

    pod: str
    slot: str


@dataclass(frozen=True)
class Restart:
    """Delete the pod (this uid only) so the StatefulSet makes it again from its current template. WHY, when
    set: a replica that cannot follow the primary as it is (a Warning says so, with the WAL it discards)."""

    pod: str
    uid: str
    why: str = ""


Action = RecordPrimary | KeepLease | Label | Fence | Promote | Repoint | Restart | CreateSlot | DropSlot | UseSlot


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    state: str  # SERVING, STARTING, WAITING, FAILING_OVER, SWITCHING_OVER or STUCK
    message: str = ""
    recheck: float | None = None  # seconds until time alone may change the answer
