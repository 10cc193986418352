"""One reconciliation of one database: spec -> values -> Helm (only when needed) -> status."""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from . import api, kube
from .credentials import credentials_secret
from .helm import Helm, HelmError
from .model import DatabaseSpec, SpecError, parse_spec
from .observe import Observation, observe
from .status import Problem, build_status, role_of
from .values import build_values, release_hash

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    problem: Problem | None = None


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def drift(spec: DatabaseSpec, values: dict[str, Any], seen: Observation, release: str) -> str | None:
    """Why the live objects no longer match the release, or None. Helm puts them back."""
    if seen.statefulset is None:
        return "the StatefulSet is missing"
    missing = {release, f"{release}-ro", f"{release}-headless"} - set(seen.services)
    if missing:
        return f"Service {sorted(missing)[0]} is missing"
    if spec.backup and seen.cronjob is None:
        return "the backup CronJob is missing"
    sts_spec = seen.statefulset.get("spec") or {}
    if sts_spec.get("replicas") != values["replicas"]:
        return f"the StatefulSet has {sts_spec.get('replicas')} replicas instead of {values['replicas']}"
    if seen.cronjob and spec.backup and (seen.cronjob.get("spec") or {}).get("schedule") != spec.backup.schedule:
        return "the backup CronJob's schedule was changed"
    return None


async def reconcile(body: dict[str, Any], known_status: dict[str, Any] | None, helm: Helm) -> Outcome:
    meta = body["metadata"]
    name, namespace, generation = meta["name"], meta["namespace"], meta.get("generation", 1)
    previous = known_status if known_status is not None else dict(body.get("status") or {})
    applied = previous.get("release")
    events: list[tuple[str, str, str]] = []
    problem: Problem | None = None
    spec: DatabaseSpec | None = None
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError as error:
        problem = Problem("InvalidSpec", str(error))

    seen = await observe(name, namespace, with_backup=True)
    if spec is not None:
        values = build_values(name, spec)
        wanted = release_hash(helm.digest, values)
        why = None
        if not applied or applied.get("appliedHash") != wanted:
            why = "install" if not applied else "spec or chart changed"
        else:
            why = drift(spec, values, seen, name)
        if why:
            try:
                if await kube.create_secret_once(credentials_secret(name, namespace)):
                    events.append(("Normal", "CredentialsCreated", f"created Secret {values['credentials']['secretName']}"))
                result = await helm.upgrade(name, namespace, values)
                applied = {"name": result.name, "revision": result.revision, "chart": result.chart,
                           "appliedHash": wanted, "status": result.status}
                log.info("%s/%s: helm revision %d applied (%s)", namespace, name, result.revision, why)
                events.append(("Normal", "Applied", f"helm revision {result.revision} applied: {why}"))
                seen = await observe(name, namespace, with_backup=True)
            except HelmError as error:
                problem = Problem("HelmFailed", str(error))

    for pod in seen.pods:
        role = role_of(pod)
        if (pod["metadata"].get("labels") or {}).get(api.ROLE_LABEL) != role:
            await kube.label_pod(namespace, pod["metadata"]["name"], api.ROLE_LABEL, role)

    status = build_status(
        release=name, namespace=namespace, generation=generation, spec=spec, observation=seen,
        applied=applied, problem=problem, previous=previous, now=now(),
    )
    return Outcome(status=status, events=events, problem=problem)


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch from previous to new status (None when equal); dropped keys become null."""
    owned_previous = {k: v for k, v in previous.items() if k != "kopf"}
    if owned_previous == new:
        return None
    patch = dict(new)
    for key in owned_previous.keys() - new.keys():
        patch[key] = None
    return patch
