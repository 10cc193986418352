"""Small statistics over per-database latencies (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100): the smallest value with at least p% of values <= it."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(latencies: dict[str, float], expected: int) -> dict[str, float | None]:
    """p50/p95/max over the databases that got there; `all` only when every one of `expected` did."""
    values = list(latencies.values())
    done = len(values)
    return {
        "count": done,
        "expected": expected,
        "p50": _round(percentile(values, 50)),
        "p95": _round(percentile(values, 95)),
        "max": _round(max(values) if values else None),
        "all": _round(max(values)) if done == expected and values else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)


def median(values: Iterable[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def across(values: list[float]) -> dict[str, float | None]:
    """The same measure over several runs: median, min, max, and the spread (max - min) / median."""
    mid = median(values)
    return {
        "median": _round(mid),
        "min": _round(min(values)),
        "max": _round(max(values)),
        "spread": round((max(values) - min(values)) / mid, 3) if mid else None,
    }
