"""Decisions Helm cannot make: storage growth, version changes, what operation is under way. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from .model import DatabaseSpec


def claim_template_size(statefulset: dict[str, Any] | None) -> str | None:
    """The storage request in the StatefulSet's `data` claim template (immutable once created)."""
    for template in ((statefulset or {}).get("spec") or {}).get("volumeClaimTemplates") or []:
        if template["metadata"]["name"] == "data":
            return template["spec"]["resources"]["requests"]["storage"]
    return None


def running_version(statefulset: dict[str, Any] | None) -> str | None:
    """The PostgreSQL version the StatefulSet runs: its postgres image tag."""
    containers = (((statefulset or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", [])
    for container in containers:
        if container["name"] == "postgres":
            return container["image"].rsplit(":", 1)[-1]
    return None


def major(version: str) -> int:
    return int(version.split(".")[0])


def version_refusal(spec: DatabaseSpec, running: str | None) -> str | None:
    """Why the spec's version cannot be applied in place, or None.

    Minor changes, up or down, keep the on-disk format and roll out as a normal
    update (replicas first, the primary last). A major change needs pg_upgrade,
    which this operator does not run."""
    if running is None or major(running) == spec.major:
        return None
    return (
        f"version {running} -> {spec.version} changes the major version in place, which is not supported: "
        f"create a new MyDatabase with version {spec.version} and spec.restore from a backup of this one, "
        f"move the clients, then delete this one (or set version back to {major(running)}.x)"
    )


@dataclass(frozen=True)
class StoragePlan:
    grow: bool  # claims must be grown and the StatefulSet re-created before Helm runs
    chart_size: str  # the size to render: the old one while growth is impossible
    refusal: str | None = None


def storage_plan(spec: DatabaseSpec, template_size: str | None, expansion_allowed: bool | None) -> StoragePlan:
    """Grow claims when spec.storage exceeds the claim template; never shrink."""
    if template_size is None:
        return StoragePlan(grow=False, chart_size=spec.storage)
    wanted, current = parse_quantity(spec.storage), parse_quantity(template_size)
    if wanted == current:
        return StoragePlan(grow=False, chart_size=spec.storage)
    if wanted < current:
        return StoragePlan(False, template_size, f"storage cannot shrink from {template_size} to {spec.storage}")
    if expansion_allowed is False:
        return StoragePlan(False, template_size,
                           f"cannot grow storage to {spec.storage}: the StorageClass does not allow volume expansion")
    return StoragePlan(grow=True, chart_size=spec.storage)


def claims_short_of(claims: list[dict[str, Any]], size: str) -> list[str]:
    """Names of claims whose capacity has not reached `size` yet."""
    wanted = parse_quantity(size)
    short = []
    for claim in claims:
        capacity = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
        if capacity is None or parse_quantity(capacity) < wanted:
            short.append(claim["metadata"]["name"])
    return sorted(short)


def operation_kind(before: dict[str, Any] | None, after: dict[str, Any], repair: bool = False) -> str:
    """Name what a new revision does, from the applied spec summaries (see applied_summary)."""
    if not before:
        return "Install"
    if repair:
        return "Repair"
    changed = {key for key in after if before.get(key) != after.get(key)}
    for key, kind in (("storage", "Resize"), ("version", "VersionChange"), ("hibernate", "Hibernate"),
                      ("replicas", "Scale")):
        if key in changed:
            if kind == "Hibernate" and not after["hibernate"]:
                return "Wake"
            return kind
    return "Upgrade"  # other values, or the chart itself


def applied_summary(spec: DatabaseSpec) -> dict[str, Any]:
    """The few spec facts kept in status to name the next operation."""
    return {"replicas": spec.replicas, "version": spec.version, "storage": spec.storage,
            "hibernate": spec.hibernate, "backup": bool(spec.backup)}


def pending_restart(statefulset: dict[str, Any] | None, pods: list[dict[str, Any]]) -> list[str]:
    """Pods not yet on the StatefulSet's current template revision."""
    revision = ((statefulset or {}).get("status") or {}).get("updateRevision")
    if not revision:
        return []
    return sorted(p["metadata"]["name"] for p in pods
                  if (p["metadata"].get("labels") or {}).get("controller-revision-hash") != revision)
