"""What the steps of one reconcile hand each other, and what the reconcile hands its caller."""

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


@dataclass
class Converged:
    """What one pass of converge() did: the release now applied and what to report."""

    observed: Observation
    applied: dict[str, Any] | None
    operation: dict[str, Any] | None
    events: list[Event] = field(default_factory=list)
    problem: Problem | None = None
    storage_blocked: str | None = None  # the database runs; only the growth waits


@dataclass
class Outcome:
    """One reconcile's result: the status to store and the Events to post."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    problem: Problem | None = None
