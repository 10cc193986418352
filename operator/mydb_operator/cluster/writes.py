"""Every write the operator makes to the API, each a blocking call run in a worker thread."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from .. import names
from . import clients
from .blocking import created, exists, threaded, tolerating

MERGE_PATCH = "application/merge-patch+json"


@threaded
def create_secret_once(body: dict[str, Any]) -> bool:
    """Create the Secret unless it exists (never overwrite a password); True when created now."""
    return created(lambda: clients.send(clients.core().create_namespaced_secret, body["metadata"]["namespace"], body))


@threaded
def label_pod(namespace: str, name: str, key: str, value: str) -> None:
    with tolerating(404):  # a pod that just went away needs no label
        clients.send(
            clients.core().patch_namespaced_pod,
            name,
            namespace,
            {"metadata": {"labels": {key: value}}},
            _content_type=MERGE_PATCH,
        )


@threaded
def patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """A merge patch of .status: it carries no resourceVersion, so it cannot conflict."""
    with tolerating(404):  # the MyDatabase (or its namespace) is gone: nothing to report on
        clients.send(
            clients.custom().patch_namespaced_custom_object_status,
            names.GROUP,
            names.VERSION,
            namespace,
            names.PLURAL,
            name,
            {"status": status},
            _content_type=MERGE_PATCH,
        )


@threaded
def delete_claims(namespace: str, release: str) -> list[str]:
    """Delete the database's PersistentVolumeClaims (data and backups); returns their names."""
    core = clients.core()
    selector = names.label_selector(names.selector_labels(release))
    listed = clients.raw(core.list_namespaced_persistent_volume_claim, namespace, label_selector=selector)
    claim_names: list[str] = [c["metadata"]["name"] for c in listed["items"]]
    for name in claim_names:
        with tolerating(404):
            core.delete_namespaced_persistent_volume_claim(name, namespace)
    return claim_names


@threaded
def delete_release_records(namespace: str, release: str) -> None:
    """Forget a release: delete Helm's stored revisions (ConfigMaps) in one request, its objects left to
    the garbage collector (they are owned by the MyDatabase)."""
    clients.send(
        clients.core().delete_collection_namespaced_config_map,
        namespace,
        label_selector=names.label_selector(names.release_record_labels(release)),
    )


@threaded
def delete_secret(namespace: str, name: str) -> None:
    with tolerating(404):
        clients.core().delete_namespaced_secret(name, namespace)


@threaded
def grow_claim(namespace: str, name: str, size: str) -> None:
    clients.send(
        clients.core().patch_namespaced_persistent_volume_claim,
        name,
        namespace,
        {"spec": {"resources": {"requests": {"storage": size}}}},
        _content_type=MERGE_PATCH,
    )


@threaded
def orphan_statefulset(namespace: str, name: str, timeout: float = 60.0) -> None:
    """Delete the StatefulSet but not its pods, so Helm can re-create it with a new claim template."""
    apps = clients.apps()
    with tolerating(404):
        apps.delete_namespaced_stateful_set(name, namespace, body=client.V1DeleteOptions(propagation_policy="Orphan"))
    # The garbage collector first frees the pods (the orphan finalizer); Helm
    # cannot re-create the StatefulSet while the old one is still terminating.
    deadline = time.monotonic() + timeout
    while exists(lambda: apps.read_namespaced_stateful_set(name, namespace)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after {timeout:.0f}s")
        time.sleep(0.5)


@threaded
def create_job_once(body: dict[str, Any]) -> bool:
    """Create the Job unless it exists (made for this request before a restart); True when created now."""
    return created(lambda: clients.send(clients.batch().create_namespaced_job, body["metadata"]["namespace"], body))
