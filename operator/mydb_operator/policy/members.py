"""One database as the failover decisions see it: its pods, its record, what each server said. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import names
from ..model.instances import InstanceFacts, Probe, Unreachable
from ..model.lease import HANDOVER_SECONDS, STILL_SECONDS, LeaseFacts
from ..model.pods import is_ready
from ..model.record import PrimaryRecord, recorded_primary
from ..model.sighting import Sighting
from ..model.timestamps import parse_time

Object = dict[str, Any]


@dataclass(frozen=True)
class HaSettings:
    failover_delay: float  # seconds
    max_lag: int  # bytes
    synchronous: bool


@dataclass(frozen=True)
class Members:
    """One database as the decisions see it."""

    namespace: str
    release: str
    pods: tuple[Object, ...]  # the database's pods, terminating ones included
    record: PrimaryRecord | None
    probes: Mapping[str, Probe]  # what each server said, by pod name; absent: not asked
    settings: HaSettings
    now: datetime
    served: bool = False  # the recorded primary has served before (status.primary names it)
    down_since: datetime | None = None  # when the database left Ready, for a primary whose pod is missing
    # The last time the recorded primary answered as one (model/sighting.py): the lag of the candidates.
    sighting: Sighting | None = None
    # When this operator first saw the primary down while a replica could take over: failoverDelay counts
    # from then, never across a stretch in which no replica could be seen (a node that went Unknown).
    watching_since: datetime | None = None
    last_primary: str | None = None  # status.primary: the last pod confirmed serving as primary
    full: frozenset[str] = frozenset()  # pods whose data volume is full (policy/volumes.is_full)
    was_full: frozenset[str] = frozenset()  # pods whose data volume the last status showed full
    # The primary lease (model/lease.py) as read in this pass, and how long this operator has seen it name its holder.
    lease: LeaseFacts | None = None
    lease_held: float = 0.0
    lease_still: float = 0.0  # seconds the lease has not changed (its holder renews it every few seconds)
    lease_renewed: bool = False  # this operator saw the lease's holder renew it (model/lease.LeaseSighting)
    lease_members: tuple[str, ...] = ()  # the database's pods, as the lease should name them ((): no lease kept)

    @property
    def primary(self) -> str:
        return recorded_primary(self.release, self.record)

    def pod(self, name: str) -> Object | None:
        return next((p for p in self.pods if p["metadata"]["name"] == name), None)

    def facts(self, name: str) -> InstanceFacts | None:
        probe = self.probes.get(name)
        return probe if isinstance(probe, InstanceFacts) else None

    def others(self) -> list[Object]:
        return [p for p in self.pods if p["metadata"]["name"] != self.primary]


# ---------------------------------------------------------------- facts of one pod


def made_after(pod: Object, moment: str) -> bool:
    """The pod was created after MOMENT (both to the second: the same second counts as before)."""
    created, decided = parse_time(pod["metadata"].get("creationTimestamp")), parse_time(moment)
    return created is not None and decided is not None and created > decided


def uid_of(pod: Object) -> str:
    uid: str = pod["metadata"].get("uid", "")
    return uid


def deleting(pod: Object) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def serving(pod: Object | None) -> bool:
    """There, not being deleted, and ready (its server answers pg_isready)."""
    return pod is not None and is_ready(pod)


def unavailable_since(pod: Object | None) -> datetime | None:
    """Since when the pod has not served: its deletion, its Ready condition turning False, or its creation."""
    if pod is None:
        return None
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        deadline = parse_time(meta["deletionTimestamp"])
        grace = meta.get("deletionGracePeriodSeconds") or 0
        return None if deadline is None else deadline - timedelta(seconds=grace)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return parse_time(condition.get("lastTransitionTime"))
    if not is_ready(pod):
        return parse_time(meta.get("creationTimestamp"))
    return None


def starting_since(pod: Object | None) -> datetime | None:
    """When a pod that is on its way up started: its server's container running and not ready since it
    started, or its containers being made or its init container running. None for a pod that is not coming
    up by itself: gone, being deleted, ready once and then no longer (hung), crash-looping, not scheduled."""
    if pod is None or deleting(pod):
        return None
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        if container.get("name") != names.POSTGRES_CONTAINER:
            continue
        state = container.get("state") or {}
        if "running" in state:
            started = parse_time(state["running"].get("startedAt"))
            unready = unavailable_since(pod)
            # Not ready since before it started: still starting. Unready since after: it served, then stopped.
            fresh = started is not None and unready is not None and unready <= started
            return started if fresh and not container.get("ready") else None
        waiting = (state.get("waiting") or {}).get("reason")
        if waiting not in ("ContainerCreating", "PodInitializing"):
            return None
    conditions = status.get("conditions") or []
    scheduled = any(c.get("type") == "PodScheduled" and c.get("status") == "True" for c in conditions)
    return parse_time(pod["metadata"].get("creationTimestamp")) if scheduled else None


def probe_interrupted(pod: Object | None) -> bool:
    """The pod's probe container, which answers the kubelet's probes of its server, is not running, or started
    again after the pod turned not ready: the readiness then says nothing of the server itself. False for a
    pod without one."""
    status = (pod or {}).get("status") or {}
    for container in status.get("containerStatuses") or []:
        if container.get("name") != names.PROBE_CONTAINER:
            continue
        running = (container.get("state") or {}).get("running")
        if running is None:
            return True
        started, unready = parse_time(running.get("startedAt")), unavailable_since(pod)
        return started is not None and unready is not None and started >= unready
    return False


def answers_as_primary(members: Members, name: str) -> bool:
    """NAME's server, asked in this pass, is a primary on the newest timeline any server reported."""
    facts = members.facts(name)
    if facts is None or facts.in_recovery:
        return False
    timelines = [f.timeline for f in members.probes.values() if isinstance(f, InstanceFacts) and f.timeline]
    return facts.timeline is None or facts.timeline >= max(timelines, default=0)


# What PostgreSQL says (SQLSTATE 57P03) while its postmaster runs crash recovery or starts: alive, not serving yet.
# With hot_standby on (the chart's), crash recovery's replay says "not yet accepting connections" (seen on 15).
RECOVERING_WORDS = (
    "the database system is in recovery mode",
    "the database system is starting up",
    "the database system is not yet accepting connections",
)


def recovering_in_place(probe: Probe | None) -> bool:
    """The server answered that it is recovering or starting: its postmaster is alive and will serve again."""
    return isinstance(probe, Unreachable) and any(words in probe.error for words in RECOVERING_WORDS)


def silent(members: Members, name: str) -> bool:
    """NAME holds the primary lease and was seen renewing it, but has not for STILL_SECONDS, its server did not
    answer this pass, and no replica that did says it streams from it: its node is lost or cut off, whatever the
    API still says of its pod (the kubelet that would say it is not ready is gone or cut off with it). A server
    that answers, or says it recovers, is not silent; an operator cut off from the server alone sees the lease
    renewed; a primary cut off from the operator and the API server but not from its replicas serves them (and
    its clients beside them), and they vouch for it (the chart's lease.pl): Patroni too promotes no replica
    while the leader answers its peers."""
    probe = members.probes.get(name)
    lease = members.lease
    return (
        isinstance(probe, Unreachable)
        and not recovering_in_place(probe)
        and lease is not None
        and lease.holder == name
        and members.lease_renewed
        and members.lease_still >= STILL_SECONDS
        and not streamed_from(members, name)
    )


def streamed_from(members: Members, name: str) -> bool:
    """A replica that answered this pass says its WAL receiver streams from NAME."""
    host = names.pod_host(members.namespace, members.release, name)
    return any(
        isinstance(probe, InstanceFacts)
        and probe.in_recovery
        and probe.receiver == "streaming"
        and probe.upstream == host
        for probe in members.probes.values()
    )


def primary_serves(members: Members) -> bool:
    """The recorded primary's pod is ready, and its server is not silent (silent)."""
    return serving(members.pod(members.primary)) and not silent(members, members.primary)


def outage_began(members: Members, name: str) -> datetime | None:
    """When NAME stopped serving: its pod's deletion or unreadiness, or, for a silent primary, when its lease
    stopped changing."""
    if silent(members, name):
        return members.now - timedelta(seconds=members.lease_still)
    return unavailable_since(members.pod(name))


def why_not_serving(pod: Object | None, name: str, members: Members | None = None) -> str:
    """Why NAME does not serve, and on which node: a failover's Event names where it came from."""
    if pod is None:
        return f"{name} is gone"
    node = (pod.get("spec") or {}).get("nodeName")
    where = f" on node {node}" if node else ""
    if deleting(pod):
        return f"{name}{where} is being deleted"
    if members is not None and silent(members, name):
        return (
            f"{name}{where} does not answer, has not renewed the primary lease for {members.lease_still:.0f}s and "
            "streams to no replica (its node is lost or cut off)"
        )
    return f"{name}{where} is not ready"


def stopped(members: Members, pod: Object) -> bool:
    """A fenced pod no longer takes writes: its postgres container has terminated (the kubelet says so before
    the pod object goes), or the primary lease has named another pod for HANDOVER_SECONDS, so that the pod, if
    it runs at all (its node cut off, its kubelet gone), stopped its server by itself."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == names.POSTGRES_CONTAINER and (container.get("state") or {}).get("terminated"):
            return True
    lease = members.lease
    return lease is not None and lease.holder != pod["metadata"]["name"] and members.lease_held >= HANDOVER_SECONDS
