"""The status write: a merge patch from what is stored to what was built, or nothing. Pure."""

from __future__ import annotations

from typing import Any


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch from previous to new status (None when equal); dropped keys become null."""
    owned_previous = {k: v for k, v in previous.items() if k != "kopf"}
    if owned_previous == new:
        return None
    patch = dict(new)
    for key in owned_previous.keys() - new.keys():
        patch[key] = None
    return patch
