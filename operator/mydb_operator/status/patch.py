"""The status write: a merge patch from what is stored to what was built, or nothing. Pure."""

from __future__ import annotations

from typing import Any


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch from previous to new status (None when equal); dropped keys become null, at every
    level: a merge patch keeps a nested key it does not name (status.backup.archive.stalledSince)."""
    owned_previous = {k: v for k, v in previous.items() if k != "kopf"}
    if owned_previous == new:
        return None
    return with_nulls(owned_previous, new)


def with_nulls(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """AFTER, with null for each key BEFORE had and AFTER has not, in nested objects too."""
    patch: dict[str, Any] = {}
    for key, value in after.items():
        old = before.get(key)
        patch[key] = with_nulls(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    for key in before.keys() - after.keys():
        patch[key] = None
    return patch


# Fields that only count progress within a phase (pods appearing and turning ready). A change to
# nothing else may wait up to PROGRESS_HOLD_SECONDS, so a roll of three pods costs the API server
# one status write at its end instead of one per pod; any other change is written at once.
# What the servers said (WAL positions, lag) moves with every write: it waits like the counters.
PROGRESS_FIELDS = frozenset(
    {"readyReplicas", "replicas", "message", "primary", "primaryNode", "pendingRestart", "instances", "timeline"}
)
PROGRESS_HOLD_SECONDS = 20.0


def _without_progress(status: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in status.items() if k not in PROGRESS_FIELDS and k != "kopf"}
    kept["conditions"] = [{k: v for k, v in c.items() if k != "message"} for c in status.get("conditions") or []]
    return kept


def progress_only(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when previous and new differ only in progress counters and messages."""
    return _without_progress(previous) == _without_progress(new)


def hold_for(previous: dict[str, Any], new: dict[str, Any], held_since: float | None, now: float) -> float | None:
    """Seconds a status change may still wait, or None to write it now.

    held_since: when this run of progress-only changes was first held back (None: not holding)."""
    if not progress_only(previous, new):
        return None
    left = PROGRESS_HOLD_SECONDS - (now - (held_since if held_since is not None else now))
    return left if left > 0 else None
