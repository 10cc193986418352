"""The targeted reads the operator makes straight from the API (most reads come from the cache).

Each is a method of the port (cluster/api.py), a blocking request run in a worker thread."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import names
from ..model.observation import Object, Observation, assemble
from .blocking import exists, threaded, tolerating
from .clients import Connection
from .resources import (
    CLAIMS,
    CONFIG_MAPS,
    CRONJOBS,
    DATABASES,
    ENDPOINT_SLICES,
    JOBS,
    LEASES,
    NAMESPACES,
    PODS,
    SECRETS,
    SERVICES,
    STATEFULSETS,
    STORAGE_CLASSES,
    Resource,
)

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class Reads(Connection):
    """The reads of the port (cluster/api.py), by URL path on the connection's client."""

    @threaded
    def observation(self, namespace: str, release: str) -> Observation:
        """One database's objects from the API: five label-selected lists and three reads by name."""
        selector = names.label_selector(names.selector_labels(release))

        def listed(resource: Resource) -> list[Object]:
            items: list[Object] = self.get(resource.path(namespace), labelSelector=selector)["items"]
            return items

        def by_name(resource: Resource, name: str) -> list[Object]:
            with tolerating(404):
                return [self.get(resource.path(namespace, name))]
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
    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A user-named Secret, to check its keys (the only Secret the operator reads)."""
        with tolerating(404):
            return self.get(SECRETS.path(namespace, name))
        return None

    @threaded
    def storage_class(self, name: str) -> dict[str, Any] | None:
        with tolerating(404):
            return self.get(STORAGE_CLASSES.path(name=name))
        return None

    @threaded
    def default_storage_class(self) -> dict[str, Any] | None:
        for item in self.get(STORAGE_CLASSES.path())["items"]:
            if (item["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
                default: dict[str, Any] = item
                return default
        return None

    @threaded
    def read_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        with tolerating(404):
            return self.get(STATEFULSETS.path(namespace, name))
        return None

    @threaded
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        with tolerating(404):
            return self.get(LEASES.path(namespace, name))
        return None

    @threaded
    def read_cronjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The whole CronJob (the cache keeps only its schedule and status)."""
        with tolerating(404):
            return self.get(CRONJOBS.path(namespace, name))
        return None

    @threaded
    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """The pods a Job made (the cache keeps only the database's own)."""
        items: list[dict[str, Any]] = self.get(PODS.path(namespace), labelSelector=f"job-name={job}")["items"]
        return items

    @threaded
    def claim_exists(self, namespace: str, name: str) -> bool:
        return exists(lambda: self.get(CLAIMS.path(namespace, name)))

    @threaded
    def read_database(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The MyDatabase as the API has it now (kopf's copy stops following a namespace being deleted)."""
        with tolerating(404):
            return self.get(DATABASES.path(namespace, name))
        return None

    @threaded
    def namespace_terminating(self, namespace: str) -> bool:
        """Whether the namespace is being deleted (or gone). False when the operator may not read namespaces:
        only an operator scoped by patterns needs to ask, and it has that right (docs/install.md)."""
        try:
            found = self.get(NAMESPACES.path(name=namespace))
        except ApiException as error:
            if error.status == 404:
                return True
            if error.status == 403:
                return False
            raise
        return bool(found["metadata"].get("deletionTimestamp"))

    @threaded
    def terminating_namespaces(self) -> list[str]:
        """The namespaces being deleted (an operator scoped by patterns may list namespaces: docs/install.md)."""
        listed = self.get(NAMESPACES.path())["items"]
        return [item["metadata"]["name"] for item in listed if item["metadata"].get("deletionTimestamp")]

    @threaded
    def list_databases(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get(DATABASES.path(namespace))["items"]
        return items
