"""What a new Helm revision does, named for status.lastOperation. Pure."""

from __future__ import annotations

from typing import Any

from ..model.spec import DatabaseSpec


def operation_kind(before: dict[str, Any] | None, after: dict[str, Any], repair: bool = False) -> str:
    """Name what a new revision does, from the applied spec summaries (see applied_summary)."""
    if not before:
        return "Install"
    if repair:
        return "Repair"
    changed = {key for key in after if before.get(key) != after.get(key)}
    for key, kind in (
        ("storage", "Resize"),
        ("version", "VersionChange"),
        ("hibernate", "Hibernate"),
        ("replicas", "Scale"),
    ):
        if key in changed:
            if kind == "Hibernate" and not after["hibernate"]:
                return "Wake"
            return kind
    return "Upgrade"  # other values, or the chart itself


def applied_summary(spec: DatabaseSpec) -> dict[str, Any]:
    """The few spec facts kept in status to name the next operation."""
    return {
        "replicas": spec.replicas,
        "version": spec.version,
        "storage": spec.storage,
        "hibernate": spec.hibernate,
        "backup": bool(spec.backup),
    }
