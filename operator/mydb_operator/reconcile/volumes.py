"""A database's data volumes in one pass: how full each is (its nodes' kubelets), whether one is full, and
storageAutoGrow's growth, which the storage plan then carries out as for a larger spec.storage."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import names
from ..cluster.api import ApiPort
from ..cluster.failures import API_FAILURES, failure_detail
from ..model.observation import Observation, name_of
from ..model.pods import stopped_for_space
from ..model.spec import DatabaseSpec
from ..model.statefulset import claim_template_size
from ..model.timestamps import parse_time, rfc3339
from ..model.volumes import VolumeUsage, data_volumes
from ..policy.backoff import Backoff
from ..policy.volumes import (
    LastGrowth,
    auto_growth,
    current_size,
    full_in_status,
    full_since,
    full_volumes,
    is_full,
    out_of_space,
    unmeasured_since,
)
from ..telemetry import metrics

log = logging.getLogger(__name__)
Event = tuple[str, str, str]
# A node's summary serves every database on it for this long. A kubelet that gave none is asked again after
# a back-off from that long to UNAVAILABLE_SECONDS: a busy one (its summary took over 10 s under CI's load)
# soon, a node with no kubelet to ask (kwok's simulated ones) rarely; figures younger than FIGURES_KEPT_SECONDS
# stand meanwhile, so a busy kubelet does not blank status.storage.
SUMMARY_MAX_AGE_SECONDS = 15.0
UNAVAILABLE_SECONDS = 300.0
FIGURES_KEPT_SECONDS = 120.0
# A database whose fullest volume is within this many points of its auto-grow threshold, or full, is looked
# at again as often as its figures change, not only every resync: writes wake no pass, and a volume fills
# between two resyncs (docs/benchmarks.md, "Storage auto-grow").
CLOSE_TO_THRESHOLD_PERCENT = 10


def kubelet_backoff() -> Backoff:
    return Backoff(first=SUMMARY_MAX_AGE_SECONDS, ceiling=UNAVAILABLE_SECONDS)


@dataclass
class NodeRead:
    """The last ask of one node's kubelet."""

    at: float
    serves: float  # seconds until it is asked again
    summary: dict[str, Any] | None  # what the figures are meanwhile
    figures_at: float | None  # when that summary was read
    backoff: Backoff = field(default_factory=kubelet_backoff)


class NodeSummaries:
    """The kubelets' summaries, each read at most once per SUMMARY_MAX_AGE_SECONDS, whatever the number
    of databases on the node."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._known: dict[str, NodeRead] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def summary(self, api: ApiPort, node: str) -> dict[str, Any] | None:
        async with self._locks.setdefault(node, asyncio.Lock()):
            last, now = self._known.get(node), self._clock()
            if last is not None and now - last.at < last.serves:
                return last.summary
            read = last or NodeRead(now, 0.0, None, None)
            read.at = now
            try:
                read.summary = await api.stats_summary(node)
            except (*API_FAILURES, ValueError) as error:
                read.serves = read.backoff.failed()
                log.info(
                    "node %s: no volume figures from its kubelet (asked again in %.0f s): %s",
                    node,
                    read.serves,
                    failure_detail(error),
                )
                if read.figures_at is None or now - read.figures_at > FIGURES_KEPT_SECONDS:
                    read.summary = None
            else:
                read.backoff.succeeded()
                read.figures_at = now if read.summary is not None else None
                read.serves = SUMMARY_MAX_AGE_SECONDS if read.summary is not None else UNAVAILABLE_SECONDS
            self._known[node] = read
            return read.summary


async def volume_usage(
    namespace: str, release: str, pods: list[dict[str, Any]], api: ApiPort, summaries: NodeSummaries
) -> list[VolumeUsage]:
    """Each data volume's figures, from the kubelets of the nodes the database's pods run on."""
    nodes = sorted({p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")})
    found: list[VolumeUsage] = []
    for node in nodes:
        summary = await summaries.summary(api, node)
        if summary is not None:
            found += data_volumes(summary, namespace, release)
    return found


@dataclass
class VolumeState:
    """What the pass learnt of the data volumes, and the spec the rest of it applies (storage as grown)."""

    spec: DatabaseSpec | None
    usage: list[VolumeUsage] = field(default_factory=list)
    full: str | None = None  # status' words for the full volumes, if any
    status: dict[str, Any] = field(default_factory=dict)  # status.storage
    events: list[Event] = field(default_factory=list)
    recheck: float | None = None  # seconds until the next pass should look again

    full_pods: frozenset[str] = frozenset()  # by the kubelet's figures, or their server stopped for space
    was_full: frozenset[str] = frozenset()  # the pods the last status showed full


def claim_capacities(release: str, claims: list[dict[str, Any]]) -> dict[str, str]:
    """Pod -> its data claim's capacity (the claim data-<pod>), for the claims bound so far."""
    prefix = f"{names.DATA_CLAIM_TEMPLATE}-"
    found = {}
    for claim in claims:
        capacity = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
        if capacity and name_of(claim).startswith(prefix + release):
            found[name_of(claim).removeprefix(prefix)] = str(capacity)
    return found


def close_to(threshold_percent: int, usage: list[VolumeUsage]) -> bool:
    return any(v.used_percent >= threshold_percent - CLOSE_TO_THRESHOLD_PERCENT for v in usage)


async def keep_volumes(
    namespace: str,
    name: str,
    spec: DatabaseSpec | None,
    previous: dict[str, Any],
    observed: Observation,
    api: ApiPort,
    summaries: NodeSummaries,
    now: datetime,
) -> VolumeState:
    usage = await volume_usage(namespace, name, observed.pods, api, summaries)
    metrics.set_volumes((namespace, name), {v.pod: (v.used_bytes, v.capacity_bytes) for v in usage})
    known: dict[str, Any] = previous.get("storage") or {}
    recorded = full_in_status(known)
    capacities = claim_capacities(name, observed.claims)
    stopped = {name_of(p) for p in observed.pods if stopped_for_space(p)}
    # A pod found full stays full until figures taken since say otherwise, or its claim grows: a crash-looping
    # server runs a moment now and then, and a summary lags; otherwise the condition would come and go, with
    # a Warning each time it came back.
    measured, since = {v.pod: v for v in usage}, full_since(known)
    unchecked = {pod for pod in recorded if unmeasured_since(since.get(pod), measured.get(pod))}
    unseen = out_of_space(sorted(stopped | unchecked), capacities, recorded)
    measured_full = {
        v.pod: capacities.get(v.pod, "") for v in usage if v.pod not in unseen and is_full(v, v.pod in recorded)
    }
    full = {**measured_full, **unseen}
    state = VolumeState(
        spec,
        usage,
        full_volumes(usage, unseen, stopped, recorded),
        full_pods=frozenset(full),
        was_full=frozenset(recorded),
    )
    if state.full or (spec and spec.auto_grow and close_to(spec.auto_grow.threshold_percent, usage)):
        state.recheck = SUMMARY_MAX_AGE_SECONDS
    if spec is None:
        return state
    size = current_size(spec.storage, claim_template_size(observed.statefulset), spec.auto_grow)
    status: dict[str, Any] = {"size": size, "volumes": [v.as_status() for v in usage]}
    if full:
        status["full"] = [
            {"pod": pod, "capacity": capacity, "since": rfc3339(since.get(pod) or now)}
            for pod, capacity in sorted(full.items())
            if capacity
        ]
    last = known.get("lastAutoGrowth")
    if spec.auto_grow is not None:
        if last:
            status["lastAutoGrowth"] = last
        at = parse_time((last or {}).get("at"))
        growth = auto_growth(spec.auto_grow, size, usage, LastGrowth(at, last["from"]) if at and last else None, now)
        if growth.size is not None:
            status["lastAutoGrowth"] = {"at": rfc3339(now), "from": size, "to": growth.size}
            state.events.append(("Normal", "StorageAutoGrow", growth.message))
            size = status["size"] = growth.size
        status["limitReached"] = growth.reason == "LimitReached"
        if status["limitReached"] and not known.get("limitReached"):
            state.events.append(("Warning", "StorageAutoGrowLimitReached", growth.message))
    state.spec = dataclasses.replace(spec, storage=size)
    state.status = status
    return state
