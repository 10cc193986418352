"""Prometheus metrics: what the operator does and how long it takes."""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import Counter, Gauge, Histogram, start_http_server

RECONCILES = Counter("mydb_reconciles_total", "Reconciles of MyDatabases, by result.", ["result"])
RECONCILE_SECONDS = Histogram(
    "mydb_reconcile_duration_seconds", "Time of one reconcile.", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
)
HELM_RUNS = Counter(
    "mydb_helm_invocations_total", "Helm subprocesses run, by command and result.", ["command", "result"]
)
HELM_SECONDS = Histogram(
    "mydb_helm_duration_seconds",
    "Time of one Helm subprocess, by command.",
    ["command"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
ERRORS = Counter("mydb_errors_total", "Problems met while reconciling, by reason.", ["reason"])
DATABASES = Gauge("mydb_databases", "MyDatabases by phase.", ["phase"])
STATUS_WRITES = Counter("mydb_status_patches_total", "Status patches written.")
OBSERVATIONS = Counter(
    "mydb_observations_total",
    "Looks at one database's objects, by source: the informers' cache (no request) or the API (six reads).",
    ["source"],
)
PRIMARY_CHANGES = Counter(
    "mydb_primary_changes_total",
    "Moves of a database's primary to another pod, by kind (Failover, Switchover) and step: started when "
    "recorded, completed when the new primary was promoted.",
    ["kind", "step"],
)
FAILOVERS_NOT_POSSIBLE = Counter(
    "mydb_failovers_not_possible_total", "Passes that found the primary down and no replica fit to take over."
)
INSTANCE_PROBES = Counter(
    "mydb_instance_probes_total", "Questions to PostgreSQL servers about their state, by result.", ["result"]
)

VOLUME_USED_BYTES = Gauge(
    "mydb_volume_used_bytes",
    "Bytes used on a pod's data volume, as its node's kubelet measured them.",
    ["namespace", "database", "pod"],
)
VOLUME_CAPACITY_BYTES = Gauge(
    "mydb_volume_capacity_bytes", "Size of a pod's data volume's filesystem.", ["namespace", "database", "pod"]
)

REPLICA_LAG_BYTES = Gauge(
    "mydb_replica_lag_bytes",
    "Bytes of WAL a replica has yet to replay to reach its primary's position, as both servers last answered.",
    ["namespace", "database", "pod"],
)
REPLICA_BEHIND = Gauge(
    "mydb_replica_behind",
    "1 while a replica is out of the read-only Service and no failover target: not streaming, on another "
    "timeline, or further behind than maxLagOnFailover; else 0.",
    ["namespace", "database", "pod"],
)

_phases: dict[tuple[str, str], str] = {}
_volumes: dict[tuple[str, str], set[str]] = {}  # database -> the pods whose volume figures are reported
_replicas: dict[tuple[str, str], set[str]] = {}  # database -> the replicas whose figures are reported
_reported: set[str] = set()


def set_phase(key: tuple[str, str], phase: str | None) -> None:
    """Record a database's phase (None: it is gone) and refresh the per-phase gauge."""
    if phase is None:
        _phases.pop(key, None)
    else:
        _phases[key] = phase
    counts = Tally(_phases.values())
    _reported.update(counts)
    for label in _reported:  # a phase that emptied goes to 0, not stale
        DATABASES.labels(label).set(counts.get(label, 0))


def set_volumes(key: tuple[str, str], figures: dict[str, tuple[int, int]]) -> None:
    """One database's data volumes, pod -> (used, capacity) bytes; a pod no longer measured is dropped."""
    for pod in _volumes.pop(key, set()) - set(figures):
        VOLUME_USED_BYTES.remove(*key, pod)
        VOLUME_CAPACITY_BYTES.remove(*key, pod)
    for pod, (used, capacity) in figures.items():
        VOLUME_USED_BYTES.labels(*key, pod).set(used)
        VOLUME_CAPACITY_BYTES.labels(*key, pod).set(capacity)
    if figures:
        _volumes[key] = set(figures)


def set_replicas(key: tuple[str, str], figures: dict[str, tuple[int, bool]]) -> None:
    """One database's replicas, pod -> (lag bytes, behind); a pod no longer a replica, or not answering, is
    dropped rather than left at a stale figure."""
    for pod in _replicas.pop(key, set()) - set(figures):
        REPLICA_LAG_BYTES.remove(*key, pod)
        REPLICA_BEHIND.remove(*key, pod)
    for pod, (lag, behind) in figures.items():
        REPLICA_LAG_BYTES.labels(*key, pod).set(lag)
        REPLICA_BEHIND.labels(*key, pod).set(1 if behind else 0)
    if figures:
        _replicas[key] = set(figures)


@asynccontextmanager
async def helm_timer(command: str) -> AsyncIterator[None]:
    started = time.perf_counter()
    result = "error"
    try:
        yield
        result = "success"
    finally:
        HELM_RUNS.labels(command, result).inc()
        HELM_SECONDS.labels(command).observe(time.perf_counter() - started)


def serve(port: int) -> None:
    if port:
        start_http_server(port)
