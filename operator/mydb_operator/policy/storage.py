"""Storage growth: grow claims in place when spec.storage exceeds them, never shrink. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.quantity import parse_quantity
from ..model.spec import DatabaseSpec


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
        return StoragePlan(
            False,
            template_size,
            f"cannot grow storage to {spec.storage}: the StorageClass does not allow volume expansion",
        )
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
