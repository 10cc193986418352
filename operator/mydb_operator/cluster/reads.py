"""The targeted reads the operator makes straight from the API (most reads come from the cache)."""

from __future__ import annotations

from typing import Any

from .. import names
from ..model.observation import Object, Observation, assemble
from . import clients
from .blocking import exists, threaded, tolerating
from .resources import (
    CLAIMS,
    CONFIG_MAPS,
    CRONJOBS,
    ENDPOINT_SLICES,
    JOBS,
    PODS,
    SECRETS,
    SERVICES,
    STATEFULSETS,
    STORAGE_CLASSES,
    Resource,
)

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


@threaded
def observation(namespace: str, release: str) -> Observation:
    """One database's objects from the API: five label-selected lists and three reads by name."""
    selector = names.label_selector(names.selector_labels(release))

    def listed(resource: Resource) -> list[Object]:
        items: list[Object] = clients.get(resource.path(namespace), labelSelector=selector)["items"]
        return items

    def by_name(resource: Resource, name: str) -> list[Object]:
        with tolerating(404):
            return [clients.get(resource.path(namespace, name))]
        return []

    return assemble(
        release,
        pods=listed(PODS),
        claims=listed(CLAIMS),
        statefulsets=by_name(STATEFULSETS, release),
        cronjobs=by_name(CRONJOBS, names.backup_cronjob(release)),
        jobs=listed(JOBS),
        services=listed(SERVICES),
        configmaps=by_name(CONFIG_MAPS, names.primary_record(release)),
        endpointslices=listed(ENDPOINT_SLICES),
    )


@threaded
def read_secret(namespace: str, name: str) -> dict[str, Any] | None:
    """A user-named Secret, to check its keys (the only Secret the operator reads)."""
    with tolerating(404):
        return clients.get(SECRETS.path(namespace, name))
    return None


@threaded
def storage_class(name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.get(STORAGE_CLASSES.path(name=name))
    return None


@threaded
def default_storage_class() -> dict[str, Any] | None:
    for item in clients.get(STORAGE_CLASSES.path())["items"]:
        if (item["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            default: dict[str, Any] = item
            return default
    return None


@threaded
def read_statefulset(namespace: str, name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.get(STATEFULSETS.path(namespace, name))
    return None


@threaded
def read_cronjob(namespace: str, name: str) -> dict[str, Any] | None:
    """The whole CronJob (the cache keeps only its schedule and status)."""
    with tolerating(404):
        return clients.get(CRONJOBS.path(namespace, name))
    return None


@threaded
def claim_exists(namespace: str, name: str) -> bool:
    return exists(lambda: clients.get(CLAIMS.path(namespace, name)))
