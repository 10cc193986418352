"""Data volumes: when one is full, and when and how far storageAutoGrow grows them all. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..model.quantity import parse_quantity
from ..model.spec import PERCENT_INCREMENT, AutoGrow
from ..model.timestamps import parse_time
from ..model.volumes import VolumeUsage

MI, GI = 2**20, 2**30
# A volume is full when less than this is left: PostgreSQL then fails to add a WAL segment (16 MiB) or a
# table's next extent; on a large volume, when less than FULL_SHARE of it is left.
FULL_BELOW_BYTES = 32 * MI
FULL_SHARE_PERCENT = 2


def is_full(usage: VolumeUsage, was_full: bool = False) -> bool:
    """Less than the margin left; a volume found full stays so until twice the margin is free again (a
    crashed server frees old WAL as it recovers, which a database still writing takes back at once)."""
    margin = max(FULL_BELOW_BYTES, usage.capacity_bytes * FULL_SHARE_PERCENT // 100)
    return usage.available_bytes < (2 * margin if was_full else margin)


def full_in_status(storage: Mapping[str, Any]) -> dict[str, str]:
    """status.storage.full: pod -> its claim's capacity when it was found full."""
    return {str(e.get("pod")): str(e.get("capacity")) for e in storage.get("full") or [] if e.get("capacity")}


def full_since(storage: Mapping[str, Any]) -> dict[str, datetime]:
    """status.storage.full: pod -> when it was found full."""
    found = {str(e.get("pod")): parse_time(e.get("since")) for e in storage.get("full") or []}
    return {pod: at for pod, at in found.items() if at is not None}


def unmeasured_since(found_at: datetime | None, usage: VolumeUsage | None) -> bool:
    """Whether a pod found full at FOUND_AT has no figures taken after that: the kubelet has none for a pod
    that does not run, and a summary is up to its cache's age plus the kubelet's period old (a full volume
    was still shown 4 % used)."""
    if usage is None or usage.measured_at is None:
        return True
    return found_at is not None and usage.measured_at <= found_at


def out_of_space(pods: Iterable[str], capacities: Mapping[str, str], known: Mapping[str, str]) -> dict[str, str]:
    """Of the pods whose server stopped for want of space, or found full and not measured since, those whose
    claim has not grown since they were found so: pod -> that capacity."""
    found = {}
    for pod in pods:
        capacity = capacities.get(pod)
        if capacity is None:
            continue
        then = known.get(pod, capacity)
        if parse_quantity(capacity) <= parse_quantity(then):
            found[pod] = then
    return found


def full_volumes(
    volumes: Sequence[VolumeUsage],
    unseen: Iterable[str] = (),
    stopped: Iterable[str] = (),
    known: Iterable[str] = (),
) -> str | None:
    """What status says of the full data volumes, naming each pod and its usage, or (with no figures) that
    its server stopped for want of space or was full when last measured; None when none is full. UNSEEN:
    out_of_space's pods; KNOWN: the pods found full before."""
    found_before, stopped_servers, unmeasured = set(known), set(stopped), sorted(unseen)
    full = [v for v in volumes if v.pod not in unmeasured and is_full(v, v.pod in found_before)]
    told = [
        f"{pod}: "
        + ("its server stopped: No space left on device" if pod in stopped_servers else "full when last measured")
        for pod in unmeasured
    ]
    if not full and not told:
        return None
    told = told + [
        f"{v.pod}: {v.used_percent}% used, {mib(v.available_bytes)} left of {mib(v.capacity_bytes)}" for v in full
    ]
    listed = "; ".join(sorted(told))
    return f"data volume full ({listed}): writes fail until the storage grows (spec.storage or storageAutoGrow)"


def mib(size: int) -> str:
    return f"{size // MI}Mi"


def grown_size(current: str, increment: str, limit: str) -> str:
    """CURRENT plus INCREMENT (a share of CURRENT, or a quantity), at most LIMIT, rounded up to a whole Mi
    (shown in Gi when it is a whole number of them)."""
    size = parse_quantity(current)
    share = PERCENT_INCREMENT.match(increment)
    step = size * int(share.group(1)) / 100 if share else parse_quantity(increment)
    wanted = min(size + step, parse_quantity(limit))
    mebibytes = math.ceil(wanted / MI)
    return f"{mebibytes // 1024}Gi" if mebibytes % 1024 == 0 else f"{mebibytes}Mi"


@dataclass(frozen=True)
class Growth:
    """What auto-grow decides in one pass: the size to grow to (None: none now), and why."""

    size: str | None
    reason: str  # "" (below the threshold), "Grow", "LimitReached", "Interval" or "Growing"
    message: str = ""


@dataclass(frozen=True)
class LastGrowth:
    """status.storage.lastAutoGrowth: when, and from which size."""

    at: datetime
    grown_from: str


def auto_growth(
    auto_grow: AutoGrow, current: str, volumes: Sequence[VolumeUsage], last: LastGrowth | None, now: datetime
) -> Growth:
    """Grow every claim when the fullest data volume reaches the threshold, by the increment, up to the limit,
    at most once per interval. A figure measured on a filesystem no larger than the last growth's starting
    size is from before that growth (the kubelet measures every minute or so): it decides nothing."""
    if not volumes:
        return Growth(None, "")
    fullest = max(volumes, key=lambda v: (v.used_percent, v.pod))
    if fullest.used_percent < auto_grow.threshold_percent:
        return Growth(None, "")
    if last is not None and fullest.capacity_bytes <= parse_quantity(last.grown_from):
        return Growth(None, "Growing", f"{fullest.pod}'s data volume has not grown from {last.grown_from} yet")
    about = f"{fullest.pod}'s data volume is {fullest.used_percent}% full (threshold {auto_grow.threshold_percent}%)"
    if parse_quantity(current) >= parse_quantity(auto_grow.limit):
        return Growth(None, "LimitReached", f"{about}, and the storage is at storageAutoGrow.limit ({auto_grow.limit})")
    if last is not None and now - last.at < timedelta(seconds=auto_grow.interval_seconds):
        return Growth(None, "Interval", f"{about}; grown at {last.at.isoformat()}, at most once per interval")
    size = grown_size(current, auto_grow.increment, auto_grow.limit)
    return Growth(size, "Grow", f"{about}: growing every data volume from {current} to {size}")


def current_size(storage: str, template_size: str | None, auto_grow: AutoGrow | None) -> str:
    """The size the claims are to have: spec.storage, or under auto-grow what the claims already grew to
    when that is more (spec.storage stays as the user wrote it)."""
    if auto_grow is None or template_size is None:
        return storage
    return template_size if parse_quantity(template_size) > parse_quantity(storage) else storage
