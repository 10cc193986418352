"""Which pod is the primary: ordinal 0 (it initialises the data); the others stream from it. Pure."""

from __future__ import annotations

from typing import Any

from .. import names
from ..model.pods import pod_ordinal


def role_of(pod: dict[str, Any]) -> str:
    """Ordinal 0 is the primary (it initialises the data); the others stream from it."""
    return names.PRIMARY if pod_ordinal(pod) == 0 else names.REPLICA


def relabels(pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(pod, role) for every pod whose role label is missing or wrong."""
    return [
        (pod["metadata"]["name"], role_of(pod))
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get(names.ROLE_LABEL) != role_of(pod)
    ]
