"""What one reconcile starts from (Target) and what it hands back (Outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.observation import Observation
from ..model.spec import DatabaseSpec
from ..status.problem import Problem
from ..status.warnings import Event


@dataclass(frozen=True)
class Target:
    """The database a reconcile converges: where it is, what it asks for, and what the last pass applied."""

    namespace: str
    name: str
    spec: DatabaseSpec
    applied: dict[str, Any] | None  # status.release
    operation: dict[str, Any] | None  # status.lastOperation
    uid: str = ""  # metadata.uid: the owner of the chart's objects
    # (version, replicas) a major upgrade applies instead of the spec's (reconcile/upgrading.py), or None
    hold: tuple[str, int] | None = None


@dataclass
class Outcome:
    """One reconcile's result, filled in as the steps run.

    Converging (converging.py, acting.py) sets what was observed, the release now
    applied, the operation and any problem; the orchestrator then adds the Events
    of the later steps and the whole .status built from these facts. The daemon
    stores `status`, posts `events` and backs off while `problem` is set."""

    observed: Observation
    applied: dict[str, Any] | None  # status.release
    operation: dict[str, Any] | None  # status.lastOperation
    events: list[Event] = field(default_factory=list)
    problem: Problem | None = None
    storage_blocked: str | None = None  # the database runs; only the growth waits
    helm_ran: bool = False  # this pass applied a new Helm revision
    retry_soon: bool = False  # a step after Helm failed: try again before the resync
    recheck: float | None = None  # the primary's plan looks again in so many seconds (a failover under way)
    deferred: bool = False  # Helm was due but left for a later pass: the primary is moving (converging.py)
    reads_position: bool = False  # the primary's position is read between passes (topology.read_position)
    status: dict[str, Any] = field(default_factory=dict)  # the whole .status, built last
