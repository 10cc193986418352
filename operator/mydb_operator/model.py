"""The MyDatabase spec as typed Python, with defaults and the checks the CRD schema cannot express."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from kubernetes.utils.quantity import parse_quantity

from . import api


class SpecError(ValueError):
    """The spec passed admission but cannot be run; `field` names the culprit."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"spec.{field_path}: {message}")
        self.field = field_path


@dataclass(frozen=True)
class Backup:
    schedule: str
    retention: str = "7d"
    storage: str = "10Gi"


@dataclass(frozen=True)
class Restore:
    from_database: str
    backup: str = "latest"


@dataclass(frozen=True)
class DatabaseSpec:
    replicas: int
    version: str
    storage: str
    storage_class_name: str = ""
    resources: Mapping[str, Any] = field(default_factory=dict)
    deletion_policy: str = api.DELETION_RETAIN
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

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def parse_spec(spec: Mapping[str, Any]) -> DatabaseSpec:
    """Build a DatabaseSpec from a CR's spec, applying defaults; raise SpecError on bad input."""
    for required in ("replicas", "version", "storage"):
        if required not in spec:
            raise SpecError(required, "is required")
    backup = spec.get("backup")
    parsed = DatabaseSpec(
        replicas=int(spec["replicas"]),
        version=str(spec["version"]),
        storage=str(spec["storage"]),
        storage_class_name=spec.get("storageClassName") or "",
        resources=dict(spec.get("resources") or {}),
        deletion_policy=spec.get("deletionPolicy") or api.DELETION_RETAIN,
        hibernate=bool(spec.get("hibernate", False)),
        backup=Backup(
            schedule=backup["schedule"],
            retention=backup.get("retention") or "7d",
            storage=str(backup.get("storage") or "10Gi"),
        ) if backup else None,
        postgresql_parameters=dict((spec.get("postgresql") or {}).get("parameters") or {}),
        existing_secret=(spec.get("credentials") or {}).get("secretName") or "",
        restore=Restore(
            from_database=spec["restore"]["fromDatabase"],
            backup=spec["restore"].get("backup") or "latest",
        ) if spec.get("restore") else None,
        pod_labels=dict(spec.get("podLabels") or {}),
        pod_annotations=dict(spec.get("podAnnotations") or {}),
        node_selector=dict((spec.get("scheduling") or {}).get("nodeSelector") or {}),
        tolerations=tuple((spec.get("scheduling") or {}).get("tolerations") or ()),
        affinity=dict((spec.get("scheduling") or {}).get("affinity") or {}),
    )
    validate(parsed)
    return parsed


VERSION_PATTERN = re.compile(r"^(1[3-7])\.(0|[1-9][0-9]?)$")
RETENTION_PATTERN = re.compile(r"^[1-9][0-9]*[hdw]$")


def validate(spec: DatabaseSpec) -> None:
    """Checks repeated from the CRD (for `render` without a cluster) plus what CEL cannot see."""
    if spec.replicas < 1:
        raise SpecError("replicas", f"must be at least 1, got {spec.replicas}")
    if not VERSION_PATTERN.match(spec.version):
        raise SpecError("version", f"{spec.version!r} is not a supported PostgreSQL version (13.x to 17.x)")
    _check_quantity("storage", spec.storage)
    if spec.deletion_policy not in (api.DELETION_RETAIN, api.DELETION_DELETE):
        raise SpecError("deletionPolicy", f"must be Retain or Delete, got {spec.deletion_policy!r}")
    if spec.backup:
        check_cron("backup.schedule", spec.backup.schedule)
        if not RETENTION_PATTERN.match(spec.backup.retention):
            raise SpecError("backup.retention", f"{spec.backup.retention!r} is not like 7d, 12h or 4w")
        _check_quantity("backup.storage", spec.backup.storage)


def _check_quantity(field_path: str, value: str) -> None:
    try:
        if parse_quantity(value) <= 0:
            raise SpecError(field_path, f"{value!r} must be larger than zero")
    except ValueError as error:
        if isinstance(error, SpecError):
            raise
        raise SpecError(field_path, f"{value!r} is not a quantity such as 100Gi") from None


CRON_SHORTCUTS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
CRON_FIELDS = (  # name, lowest, highest, names allowed in place of numbers
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)


def check_cron(field_path: str, expression: str) -> None:
    """Refuse what the CronJob controller would refuse: wrong arity or values out of range."""
    if expression.strip().lower() in CRON_SHORTCUTS:
        return
    parts = expression.split()
    if len(parts) != 5:
        raise SpecError(field_path, f"{expression!r} must have 5 fields (minute hour day month weekday)")
    for part, (name, low, high, names) in zip(parts, CRON_FIELDS):
        for item in part.split(","):
            _check_cron_item(field_path, name, item, low, high, names)


def _check_cron_item(field_path: str, name: str, item: str, low: int, high: int, names: tuple) -> None:
    body, _, step = item.partition("/")
    if step and (not step.isdigit() or int(step) == 0):
        raise SpecError(field_path, f"bad step {step!r} in the {name} field")
    if body in ("*", "?"):
        return
    bounds = body.split("-")
    if len(bounds) > 2:
        raise SpecError(field_path, f"bad range {body!r} in the {name} field")
    values = []
    for bound in bounds:
        if bound.lower() in names:
            values.append(names.index(bound.lower()) + (1 if low == 1 else 0))
        elif bound.isdigit():
            values.append(int(bound))
        else:
            raise SpecError(field_path, f"{bound!r} is not a value of the {name} field")
    for value in values:
        if not low <= value <= high:
            raise SpecError(field_path, f"{value} is out of range for the {name} field ({low}-{high})")
    if len(values) == 2 and values[0] > values[1]:
        raise SpecError(field_path, f"range {body!r} in the {name} field runs backwards")
