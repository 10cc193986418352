"""The MyDatabase spec as typed Python, with defaults and the checks the CRD schema cannot express."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .application import Application, parse_application
from .cron import check_cron
from .errors import SpecError
from .fields import integer, section, text
from .quantity import parse_quantity
from .retention import RETENTION_DEFAULT, valid_retention
from .versions import VERSION_PATTERN, major, supported_range

DELETION_RETAIN, DELETION_DELETE = "Retain", "Delete"
# Bounds and defaults the CRD says too (crds/: minimum, maximum, default, the CEL floor of a size); the
# chart's values.yaml and values.schema.json repeat some. tests/chart/test_one_source.py holds them equal.
MIN_REPLICAS, MAX_REPLICAS = 1, 16
MAX_FAILOVER_DELAY_SECONDS = 3600
MIN_STORAGE = "1Mi"  # of a data or backup volume
BACKUP_STORAGE = "10Gi"
RESTORE_LATEST = "latest"
# How long the primary may stop serving before a replica takes over (seconds), and how far behind
# the primary's last known WAL position a replica may be and still be promoted (docs/high-availability.md).
FAILOVER_DELAY_SECONDS = 3
MAX_LAG_ON_FAILOVER = "16Mi"
# spec.storageAutoGrow's defaults and bounds (docs/configuration.md, "Storage auto-grow").
AUTO_GROW_THRESHOLD_PERCENT = 80
MIN_AUTO_GROW_THRESHOLD, MAX_AUTO_GROW_THRESHOLD = 50, 95
AUTO_GROW_INCREMENT = "50%"
AUTO_GROW_INTERVAL_SECONDS = 300
MAX_AUTO_GROW_INTERVAL_SECONDS = 86400
PERCENT_INCREMENT = re.compile(r"^([1-9][0-9]{0,2})%$")  # 1% to 999% of the current size


@dataclass(frozen=True)
class Backup:
    schedule: str
    retention: str = RETENTION_DEFAULT
    storage: str = BACKUP_STORAGE
    resources: Mapping[str, Any] = field(default_factory=dict)
    continuous: bool = True  # the WAL archive and base backups, for recovery to a moment
    verify: bool = False  # a verification Job after each new base backup


@dataclass(frozen=True)
class Restore:
    from_database: str
    backup: str = RESTORE_LATEST
    point_in_time: str = ""  # RFC 3339; empty: the end of the archive (or the dump named)


@dataclass(frozen=True)
class AutoGrow:
    """spec.storageAutoGrow: grow every data claim when one is THRESHOLD_PERCENT full, by INCREMENT (a share
    of the current size, "50%", or a quantity), never past LIMIT, at most once per INTERVAL_SECONDS."""

    limit: str
    threshold_percent: int = AUTO_GROW_THRESHOLD_PERCENT
    increment: str = AUTO_GROW_INCREMENT
    interval_seconds: int = AUTO_GROW_INTERVAL_SECONDS


@dataclass(frozen=True)
class DatabaseSpec:
    replicas: int
    version: str
    storage: str
    storage_class_name: str = ""
    resources: Mapping[str, Any] = field(default_factory=dict)
    deletion_policy: str = DELETION_RETAIN
    hibernate: bool = False
    backup: Backup | None = None
    postgresql_parameters: Mapping[str, str] = field(default_factory=dict)
    existing_secret: str = ""  # a Secret the user made; empty: the operator creates one
    restore: Restore | None = None
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)
    failover_delay: int = FAILOVER_DELAY_SECONDS
    max_lag_on_failover: str = MAX_LAG_ON_FAILOVER
    synchronous: bool = False  # spec.replication.synchronous
    tls: bool = True  # spec.tls.enabled: TLS for every TCP connection, plain TCP refused
    tls_secret: str = ""  # spec.tls.secretName: the user's server certificate; empty: the operator issues one
    auto_grow: AutoGrow | None = None  # spec.storageAutoGrow; None: the claims keep spec.storage
    application: Application = field(default_factory=Application)  # spec.application

    @property
    def major(self) -> int:
        return major(self.version)


def parse_spec(spec: Mapping[str, Any]) -> DatabaseSpec:
    """Build a DatabaseSpec from a CR's spec, applying defaults; raise SpecError on bad input."""
    for required in ("replicas", "version", "storage"):
        if required not in spec:
            raise SpecError(required, "is required")
    backup = section(spec, "backup")
    restore = section(spec, "restore")
    scheduling = section(spec, "scheduling") or {}
    replication = section(spec, "replication") or {}
    tls = section(spec, "tls") or {}
    auto_grow = section(spec, "storageAutoGrow")
    parsed = DatabaseSpec(
        replicas=integer("replicas", spec["replicas"]),
        version=str(spec["version"]),
        storage=str(spec["storage"]),
        storage_class_name=spec.get("storageClassName") or "",
        resources=dict(spec.get("resources") or {}),
        deletion_policy=spec.get("deletionPolicy") or DELETION_RETAIN,
        hibernate=bool(spec.get("hibernate", False)),
        backup=Backup(
            schedule=text(backup, "schedule", "backup.schedule"),
            retention=text(backup, "retention", "backup.retention", RETENTION_DEFAULT),
            storage=text(backup, "storage", "backup.storage", BACKUP_STORAGE),
            resources=dict(backup.get("resources") or {}),
            continuous=bool(backup.get("continuous", True)),
            verify=bool(backup.get("verify", False)),
        )
        if backup
        else None,
        postgresql_parameters=dict((spec.get("postgresql") or {}).get("parameters") or {}),
        existing_secret=(spec.get("credentials") or {}).get("secretName") or "",
        restore=Restore(
            from_database=text(restore, "fromDatabase", "restore.fromDatabase"),
            backup=restore.get("backup") or RESTORE_LATEST,
            point_in_time=str(restore.get("pointInTime") or ""),
        )
        if restore
        else None,
        pod_labels=dict(spec.get("podLabels") or {}),
        pod_annotations=dict(spec.get("podAnnotations") or {}),
        node_selector=dict(scheduling.get("nodeSelector") or {}),
        tolerations=tuple(scheduling.get("tolerations") or ()),
        affinity=dict(scheduling.get("affinity") or {}),
        failover_delay=integer("failoverDelay", spec.get("failoverDelay", FAILOVER_DELAY_SECONDS)),
        max_lag_on_failover=text(spec, "maxLagOnFailover", "maxLagOnFailover", MAX_LAG_ON_FAILOVER),
        synchronous=bool(replication.get("synchronous", False)),
        tls=bool(tls.get("enabled", True)),
        tls_secret=text(tls, "secretName", "tls.secretName", ""),
        auto_grow=AutoGrow(
            limit=text(auto_grow, "limit", "storageAutoGrow.limit"),
            threshold_percent=integer(
                "storageAutoGrow.thresholdPercent", auto_grow.get("thresholdPercent", AUTO_GROW_THRESHOLD_PERCENT)
            ),
            increment=text(auto_grow, "increment", "storageAutoGrow.increment", AUTO_GROW_INCREMENT),
            interval_seconds=integer(
                "storageAutoGrow.intervalSeconds", auto_grow.get("intervalSeconds", AUTO_GROW_INTERVAL_SECONDS)
            ),
        )
        if auto_grow is not None
        else None,
        application=parse_application(section(spec, "application")),
    )
    validate(parsed)
    return parsed


def validate(spec: DatabaseSpec) -> None:
    """Checks repeated from the CRD (for `render` without a cluster) plus what CEL cannot see."""
    if not MIN_REPLICAS <= spec.replicas <= MAX_REPLICAS:
        raise SpecError("replicas", f"must be {MIN_REPLICAS} to {MAX_REPLICAS}, got {spec.replicas}")
    if not VERSION_PATTERN.match(spec.version):
        raise SpecError("version", f"{spec.version!r} is not a supported PostgreSQL version ({supported_range()})")
    _check_quantity("storage", spec.storage)
    if not 0 <= spec.failover_delay <= MAX_FAILOVER_DELAY_SECONDS:
        raise SpecError(
            "failoverDelay", f"must be 0 to {MAX_FAILOVER_DELAY_SECONDS} seconds, got {spec.failover_delay}"
        )
    if lag_limit(spec.max_lag_on_failover) is None:
        raise SpecError("maxLagOnFailover", f"{spec.max_lag_on_failover!r} is not a quantity of bytes such as 16Mi")
    if spec.synchronous and spec.replicas < 2:
        raise SpecError("replication.synchronous", "needs at least 2 replicas: a commit waits for a replica")
    if spec.tls_secret and not spec.tls:
        raise SpecError("tls.secretName", "names a certificate for TLS, which tls.enabled: false turns off")
    if spec.deletion_policy not in (DELETION_RETAIN, DELETION_DELETE):
        raise SpecError("deletionPolicy", f"must be Retain or Delete, got {spec.deletion_policy!r}")
    if spec.auto_grow:
        _check_auto_grow(spec.auto_grow, spec.storage)
    if spec.backup:
        check_cron("backup.schedule", spec.backup.schedule)
        if not valid_retention(spec.backup.retention):
            raise SpecError("backup.retention", f"{spec.backup.retention!r} is not like 7d, 12h or 4w")
        _check_quantity("backup.storage", spec.backup.storage)


def _check_auto_grow(auto_grow: AutoGrow, storage: str) -> None:
    low, high = MIN_AUTO_GROW_THRESHOLD, MAX_AUTO_GROW_THRESHOLD
    if not low <= auto_grow.threshold_percent <= high:
        raise SpecError(
            "storageAutoGrow.thresholdPercent", f"must be {low} to {high}, got {auto_grow.threshold_percent}"
        )
    if not PERCENT_INCREMENT.match(auto_grow.increment):
        try:
            _check_quantity("storageAutoGrow.increment", auto_grow.increment)
        except SpecError:
            raise SpecError(
                "storageAutoGrow.increment",
                f"{auto_grow.increment!r} is neither a share of the size (1% to 999%) nor a quantity such as 10Gi",
            ) from None
    _check_quantity("storageAutoGrow.limit", auto_grow.limit)
    if parse_quantity(auto_grow.limit) < parse_quantity(storage):
        raise SpecError("storageAutoGrow.limit", f"{auto_grow.limit} is below storage ({storage})")
    if not 0 <= auto_grow.interval_seconds <= MAX_AUTO_GROW_INTERVAL_SECONDS:
        raise SpecError(
            "storageAutoGrow.intervalSeconds",
            f"must be 0 to {MAX_AUTO_GROW_INTERVAL_SECONDS} seconds, got {auto_grow.interval_seconds}",
        )


def lag_limit(quantity: str) -> int | None:
    """maxLagOnFailover in bytes (None: not a quantity of zero or more)."""
    try:
        limit = parse_quantity(quantity)
    except ValueError:
        return None
    return int(limit) if limit >= 0 else None


def _check_quantity(field_path: str, value: str) -> None:
    try:
        if parse_quantity(value) < parse_quantity(MIN_STORAGE):
            raise SpecError(field_path, f"{value!r} must be at least {MIN_STORAGE}")
    except ValueError as error:
        if isinstance(error, SpecError):
            raise
        raise SpecError(field_path, f"{value!r} is not a quantity such as 100Gi") from None
