"""Cached objects kept small: only the parts a reconcile reads, their strings shared. Pure."""

from __future__ import annotations

import sys
from typing import Any

Object = dict[str, Any]

# Parts no reconcile reads (status, the policies and drift look at pod and Job status, Service
# names, and whole StatefulSets, CronJobs and claims): not kept, to keep memory flat at hundreds
# of databases. A fresh API read before acting has whole objects anyway.
UNREAD = {"pods": ("spec",), "jobs": ("spec",), "services": ("spec", "status")}


def shared_strings(value: Any) -> Any:
    """The same data with its keys and short strings interned: thousands of cached objects
    then share one copy of "metadata", "Ready", "True" ... instead of one each (half the memory)."""
    if isinstance(value, dict):
        return {sys.intern(k): shared_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared_strings(v) for v in value]
    if isinstance(value, str) and len(value) <= 64:
        return sys.intern(value)
    return value


def slim(kind: str, obj: Object) -> Object:
    """The object as cached: without managedFields (the largest part of a server-side applied
    object) and the kind's UNREAD parts, its strings shared."""
    kept = {k: v for k, v in obj.items() if k not in UNREAD.get(kind, ())}
    kept["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    slimmed: Object = shared_strings(kept)
    return slimmed
