"""Why the operator could not do its job, as the Ready condition's reason and message."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """Why the operator could not do its job: a CamelCase reason and a sentence."""

    reason: str
    message: str
