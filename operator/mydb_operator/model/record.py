"""The operator's record of the primary: the ConfigMap <name>-primary. Pure.

The pods read its `primary` key at start (the chart mounts it; role.sh), the
operator reads it back through the informers. It is written before anything
acts on it (the decision of a failover or a switchover), with the object's
resourceVersion, so a write based on a stale copy fails instead of winning
(Kubernetes' compare-and-swap). A database that never moved its primary has
none: ordinal 0 is the primary then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import names

FAILOVER, SWITCHOVER = "Failover", "Switchover"
# The primary restarts where it is (onto a new pod template, when no switchover can do it): recorded before
# its pod is deleted, so its absence is not taken for a failure (policy/primary.primary_down).
RESTART = "Restart"
# The ConfigMap went missing (a cleanup script, a GitOps prune): written again from what the servers say, never
# left to mean ordinal 0 (policy/primary.rebuilt_record).
REBUILT = "Rebuilt"


@dataclass(frozen=True)
class PrimaryRecord:
    primary: str  # the pod the database's primary is, or is being promoted to
    previous: str = ""  # the pod it moved from
    reason: str = ""  # Failover, Switchover, Restart or Rebuilt
    decided_at: str = ""  # when the operator decided the move (RFC 3339)
    promoted_at: str = ""  # when `primary` was promoted; empty while that is pending
    resource_version: str = ""  # of the ConfigMap read: the precondition of the next write

    def data(self) -> dict[str, str]:
        """The ConfigMap's data (the pods read `primary`)."""
        values = {
            "primary": self.primary,
            "previous": self.previous,
            "reason": self.reason,
            "decidedAt": self.decided_at,
            "promotedAt": self.promoted_at,
        }
        return {key: value for key, value in values.items() if value}


def parse_record(configmap: dict[str, Any] | None) -> PrimaryRecord | None:
    """The record in the ConfigMap, or None (none, or one naming no primary)."""
    data = (configmap or {}).get("data") or {}
    primary = (data.get("primary") or "").strip()
    if not primary:
        return None
    return PrimaryRecord(
        primary=primary,
        previous=data.get("previous", ""),
        reason=data.get("reason", ""),
        decided_at=data.get("decidedAt", ""),
        promoted_at=data.get("promotedAt", ""),
        resource_version=((configmap or {}).get("metadata") or {}).get("resourceVersion", ""),
    )


def recorded_primary(release: str, record: PrimaryRecord | None) -> str:
    """The pod that is (or is becoming) the primary: the record's, else ordinal 0."""
    return record.primary if record is not None else names.pod_name(release, 0)
