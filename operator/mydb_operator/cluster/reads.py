"""The targeted reads the operator makes straight from the API (most reads come from the cache)."""

from __future__ import annotations

from typing import Any

from .. import names
from ..model.observation import Object, Observation, assemble
from . import clients
from .blocking import exists, threaded, tolerating

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


@threaded
def observation(namespace: str, release: str) -> Observation:
    """One database's objects from the API: four label-selected lists and two reads by name."""
    core, apps, batch = clients.core(), clients.apps(), clients.batch()
    selector = names.label_selector(names.selector_labels(release))

    def listed(call: Any) -> list[Object]:
        items: list[Object] = clients.raw(call, namespace, label_selector=selector)["items"]
        return items

    def by_name(read_call: Any, name: str) -> list[Object]:
        with tolerating(404):
            return [clients.raw(read_call, name, namespace)]
        return []

    return assemble(
        release,
        pods=listed(core.list_namespaced_pod),
        claims=listed(core.list_namespaced_persistent_volume_claim),
        statefulsets=by_name(apps.read_namespaced_stateful_set, release),
        cronjobs=by_name(batch.read_namespaced_cron_job, names.backup_cronjob(release)),
        jobs=listed(batch.list_namespaced_job),
        services=listed(core.list_namespaced_service),
    )


@threaded
def read_secret(namespace: str, name: str) -> dict[str, Any] | None:
    """A user-named Secret, to check its keys (the only Secret the operator reads)."""
    with tolerating(404):
        return clients.raw(clients.core().read_namespaced_secret, name, namespace)
    return None


@threaded
def storage_class(name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.raw(clients.storage().read_storage_class, name)
    return None


@threaded
def default_storage_class() -> dict[str, Any] | None:
    for item in clients.raw(clients.storage().list_storage_class)["items"]:
        if (item["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            default: dict[str, Any] = item
            return default
    return None


@threaded
def read_statefulset(namespace: str, name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.raw(clients.apps().read_namespaced_stateful_set, name, namespace)
    return None


@threaded
def read_cronjob(namespace: str, name: str) -> dict[str, Any] | None:
    """The whole CronJob (the cache keeps only its schedule and status)."""
    with tolerating(404):
        return clients.raw(clients.batch().read_namespaced_cron_job, name, namespace)
    return None


@threaded
def claim_exists(namespace: str, name: str) -> bool:
    return exists(lambda: clients.send(clients.core().read_namespaced_persistent_volume_claim, name, namespace))
