"""Every write the operator makes to the API: methods of the port (cluster/api.py), each a blocking
request run in a worker thread."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import names
from .blocking import created, exists, threaded, tolerating
from .clients import JSON_PATCH, MERGE_PATCH, Connection
from .resources import CLAIMS, CONFIG_MAPS, DATABASES, JOBS, LEASES, PODS, SECRETS, STATEFULSETS

# How long storage growth waits for an orphaned StatefulSet to go before it reports the resize stalled.
ORPHANING_SECONDS = 60.0


class Writes(Connection):
    """The writes of the port (cluster/api.py), by URL path on the connection's client."""

    @threaded
    def create_secret_once(self, body: dict[str, Any]) -> bool:
        """Create the Secret unless it exists (never overwrite a password); True when created now."""
        return created(lambda: self.send("POST", SECRETS.path(body["metadata"]["namespace"]), body))

    @threaded
    def write_secret(self, body: dict[str, Any], replacing: dict[str, Any] | None) -> None:
        """Create the Secret, or replace REPLACING (a certificate the operator issues again) as it was read: the
        resourceVersion it carries makes the API refuse (409) a Secret made or changed since."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if replacing is None:
            self.send("POST", SECRETS.path(namespace), body)
            return
        version = replacing["metadata"]["resourceVersion"]
        replacement = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        self.send("PUT", SECRETS.path(namespace, name), replacement)

    @threaded
    def update_secret_data(self, secret: dict[str, Any], changes: dict[str, str | None]) -> None:
        """Replace the Secret as it was read with these keys set or, for None, removed, the others (the passwords)
        as they were. It carries the resourceVersion read: a change made since is refused (409), not overwritten.
        (A replace, not a patch: the operator's Role has update on Secrets, for its certificates, and no patch.)"""
        body = {**secret, "data": dict(secret.get("data") or {})}
        for key, value in changes.items():
            if value is None:
                body["data"].pop(key, None)
            else:
                body["data"][key] = base64.b64encode(value.encode()).decode()
        metadata = body["metadata"]
        self.send("PUT", SECRETS.path(metadata["namespace"], metadata["name"]), body)

    @threaded
    def label_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        with tolerating(404):  # a pod that just went away needs no label
            self.send(
                "PATCH",
                PODS.path(namespace, name),
                {"metadata": {"labels": {key: value}}},
                content_type=MERGE_PATCH,
            )

    @threaded
    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """A merge patch of .status: it carries no resourceVersion, so it cannot conflict."""
        with tolerating(404):  # the MyDatabase (or its namespace) is gone: nothing to report on
            self.send("PATCH", DATABASES.path(namespace, name, "status"), {"status": status}, content_type=MERGE_PATCH)

    @threaded
    def delete_claims(self, namespace: str, release: str) -> list[str]:
        """Delete the database's PersistentVolumeClaims (data and backups); returns their names."""
        selector = names.label_selector(names.selector_labels(release))
        listed = self.get(CLAIMS.path(namespace), labelSelector=selector)
        claim_names: list[str] = [c["metadata"]["name"] for c in listed["items"]]
        for name in claim_names:
            with tolerating(404):
                self.send("DELETE", CLAIMS.path(namespace, name))
        return claim_names

    @threaded
    def delete_release_records(self, namespace: str, release: str) -> None:
        """Forget a release: delete Helm's stored revisions (ConfigMaps) in one request, its objects left to
        the garbage collector (they are owned by the MyDatabase)."""
        self.send(
            "DELETE",
            CONFIG_MAPS.path(namespace),
            labelSelector=names.label_selector(names.release_record_labels(release)),
        )

    @threaded
    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> None:
        body = {"preconditions": {"uid": uid}} if uid else None
        # Gone already; or (409) replaced by another object since it was read, which stays.
        with tolerating(404), tolerating(409):
            self.send("DELETE", SECRETS.path(namespace, name), body)

    @threaded
    def grow_claim(self, namespace: str, name: str, size: str) -> None:
        self.send(
            "PATCH",
            CLAIMS.path(namespace, name),
            {"spec": {"resources": {"requests": {"storage": size}}}},
            content_type=MERGE_PATCH,
        )

    @threaded
    def delete_statefulset(self, namespace: str, name: str) -> None:
        """Delete the StatefulSet now (the garbage collector then deletes its pods), so that it re-creates
        no claim from its template."""
        with tolerating(404):
            self.send("DELETE", STATEFULSETS.path(namespace, name), {"propagationPolicy": "Background"})

    @threaded
    def orphan_statefulset(self, namespace: str, name: str) -> None:
        """Delete the StatefulSet but not its pods, so Helm can re-create it with a new claim template."""
        path = STATEFULSETS.path(namespace, name)
        with tolerating(404):
            self.send("DELETE", path, {"propagationPolicy": "Orphan"})
        # The garbage collector first frees the pods (the orphan finalizer); Helm
        # cannot re-create the StatefulSet while the old one is still terminating.
        deadline = time.monotonic() + ORPHANING_SECONDS
        while exists(lambda: self.get(path)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after {ORPHANING_SECONDS:.0f}s")
            time.sleep(0.5)

    @threaded
    def create_job_once(self, body: dict[str, Any]) -> bool:
        """Create the Job unless it exists (made for this request before a restart); True when created now."""
        return created(lambda: self.send("POST", JOBS.path(body["metadata"]["namespace"]), body))

    @threaded
    def write_record(self, body: dict[str, Any]) -> str:
        """Create or replace the ConfigMap recording the primary; returns its new resourceVersion.

        A replacement carries the resourceVersion it was based on: if the ConfigMap changed
        since, the API refuses it (409) instead of letting a stale decision win."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if body["metadata"].get("resourceVersion"):
            stored = self.exchange("PUT", CONFIG_MAPS.path(namespace, name), body)
        else:
            stored = self.exchange("POST", CONFIG_MAPS.path(namespace), body)
        version: str = stored["metadata"]["resourceVersion"]
        return version

    @threaded
    def delete_record(self, namespace: str, release: str) -> None:
        with tolerating(404):
            self.send("DELETE", CONFIG_MAPS.path(namespace, names.primary_record(release)))
        with tolerating(404):
            self.send("DELETE", LEASES.path(namespace, names.primary_record(release)))

    @threaded
    def write_lease(self, body: dict[str, Any]) -> str:
        """Create the primary lease, or replace it at the resourceVersion read (the API refuses, 409, a Lease
        renewed or changed since)."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if body["metadata"].get("resourceVersion"):
            stored = self.exchange("PUT", LEASES.path(namespace, name), body)
        else:
            stored = self.exchange("POST", LEASES.path(namespace), body)
        version: str = stored["metadata"]["resourceVersion"]
        return version

    @threaded
    def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None) -> None:
        """Delete the pod with this uid (not one the StatefulSet made since under its name); grace None: its own
        terminationGracePeriodSeconds. Already gone, or another pod by now: nothing to do."""
        options: dict[str, Any] = {"preconditions": {"uid": uid}}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        try:
            self.send("DELETE", PODS.path(namespace, name), options)
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    @threaded
    def remove_annotation(self, namespace: str, name: str, key: str, value: str) -> None:
        """Remove the MyDatabase's annotation KEY if it still says VALUE (a newer request is kept)."""
        pointer = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        operations = [{"op": "test", "path": pointer, "value": value}, {"op": "remove", "path": pointer}]
        try:
            self.send("PATCH", DATABASES.path(namespace, name), operations, content_type=JSON_PATCH)
        except ApiException as error:
            if error.status not in (404, 409, 422):  # gone, or the annotation changed meanwhile
                raise

    @threaded
    def release_finalizer(self, namespace: str, name: str, resource_version: str, finalizers: list[str]) -> None:
        """Set the MyDatabase's finalizers to `finalizers` if it is still at `resource_version`; gone or changed
        meanwhile: nothing to do (kopf, or a later pass, has seen it)."""
        operations = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "replace", "path": "/metadata/finalizers", "value": finalizers},
        ]
        try:
            self.send("PATCH", DATABASES.path(namespace, name), operations, content_type=JSON_PATCH)
        except ApiException as error:
            if error.status not in (404, 409, 422):
                raise
