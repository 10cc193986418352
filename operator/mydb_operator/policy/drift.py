"""Drift: live objects that no longer match the release, so Helm must run again despite the hash. Pure."""

from __future__ import annotations

from typing import Any

from .. import names
from ..model.observation import Observation
from ..model.spec import DatabaseSpec


def missing_child(spec: DatabaseSpec, observed: Observation, release: str) -> str | None:
    """Which object of the release is not there, or None."""
    if observed.statefulset is None:
        return "the StatefulSet is missing"
    missing = set(names.release_services(release)) - set(observed.services)
    if missing:
        return f"Service {sorted(missing)[0]} is missing"
    if spec.backup and observed.cronjob is None:
        return "the backup CronJob is missing"
    return None


def drift(spec: DatabaseSpec, values: dict[str, Any], observed: Observation, release: str) -> str | None:
    """Why the live objects no longer match the release, or None. Helm puts them back."""
    missing = missing_child(spec, observed, release)
    if missing or observed.statefulset is None:
        return missing
    sts_spec = observed.statefulset.get("spec") or {}
    if sts_spec.get("replicas") != values["replicas"]:
        return f"the StatefulSet has {sts_spec.get('replicas')} replicas instead of {values['replicas']}"
    if (
        observed.cronjob
        and spec.backup
        and (observed.cronjob.get("spec") or {}).get("schedule") != spec.backup.schedule
    ):
        return "the backup CronJob's schedule was changed"
    return None
