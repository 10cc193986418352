"""What the cluster says about one database, read through the API (no decisions here)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from . import api, clients


@dataclass(frozen=True)
class Observation:
    statefulset: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    cronjob: dict[str, Any] | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)  # the pods' data claims


def _get_or_none(read, *args) -> dict[str, Any] | None:
    try:
        return clients.raw(read, *args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _observe(release: str, namespace: str) -> Observation:
    core, apps, batch = clients.core(), clients.apps(), clients.batch()
    selector = api.label_selector(api.selector_labels(release))

    def listed(call) -> list[dict[str, Any]]:
        return clients.raw(call, namespace, label_selector=selector)["items"]
    pods = listed(core.list_namespaced_pod)
    claims = listed(core.list_namespaced_persistent_volume_claim)
    return Observation(
        statefulset=_get_or_none(apps.read_namespaced_stateful_set, release, namespace),
        pods=[p for p in pods if p["metadata"]["name"].rsplit("-", 1)[0] == release],
        cronjob=_get_or_none(batch.read_namespaced_cron_job, f"{release}-backup", namespace),
        jobs=listed(batch.list_namespaced_job),
        services=[s["metadata"]["name"] for s in listed(core.list_namespaced_service)],
        claims=[c for c in claims if c["metadata"]["name"].startswith(f"data-{release}-")],
    )


async def observe(release: str, namespace: str) -> Observation:
    return await asyncio.to_thread(_observe, release, namespace)
