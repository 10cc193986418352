"""The time stamps status carries (lastTransitionTime, startedAt, finishedAt)."""

from __future__ import annotations

import datetime


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
