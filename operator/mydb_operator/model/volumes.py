"""How full each data volume is, from a kubelet's summary (GET /stats/summary). Pure.

The kubelet measures a volume with statfs (for `local` and CSI volumes; a hostPath volume has no
figures): capacity, used and available bytes of the filesystem the pod mounts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import names
from .timestamps import parse_time

MI = 2**20


@dataclass(frozen=True)
class VolumeUsage:
    pod: str
    claim: str
    used_bytes: int
    capacity_bytes: int
    available_bytes: int
    measured_at: datetime | None = None  # when the kubelet took these figures (its summary may be older than the pass)

    @property
    def used_percent(self) -> int:
        """Used share of the filesystem, rounded down (0 for a volume of no capacity)."""
        return self.used_bytes * 100 // self.capacity_bytes if self.capacity_bytes else 0

    def as_status(self) -> dict[str, Any]:
        """Its entry in status.storage.volumes: used bytes to the MiB below, so that an idle server's few
        written bytes change no status (the metric has them exact)."""
        return {
            "pod": self.pod,
            "usedBytes": self.used_bytes // MI * MI,
            "capacityBytes": self.capacity_bytes,
            "usedPercent": self.used_percent,
        }


def data_volumes(summary: dict[str, Any], namespace: str, release: str) -> list[VolumeUsage]:
    """The usage of one database's data claims (data-<release>-N), as the node's kubelet measured them."""
    prefix = names.data_claim_prefix(release)
    found = []
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        if ref.get("namespace") != namespace:
            continue
        for volume in pod.get("volume") or []:
            claim = (volume.get("pvcRef") or {}).get("name") or ""
            figures = [volume.get(key) for key in ("usedBytes", "capacityBytes", "availableBytes")]
            # Its own pod's: another pod on the node may mount the claim too (RWO is per node).
            own = claim == f"{names.DATA_CLAIM_TEMPLATE}-{ref.get('name')}"
            if (
                own
                and claim.startswith(prefix)
                and claim[len(prefix) :].isdigit()
                and all(isinstance(f, int) for f in figures)
            ):
                used, capacity, available = figures
                pod_name, measured_at = str(ref.get("name") or ""), parse_time(volume.get("time"))
                found.append(VolumeUsage(pod_name, claim, used, capacity, available, measured_at))
    return sorted(found, key=lambda usage: usage.claim)


def kubelet_endpoint(node: dict[str, Any]) -> tuple[str, int] | None:
    """Where a node's kubelet listens: its InternalIP and the port it reports; None if it says neither."""
    status = node.get("status") or {}
    address = next((a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), None)
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    return (address, port) if isinstance(address, str) and address and isinstance(port, int) and port else None
