"""Every write the operator makes to the API (and the few targeted reads around them).

Each is a small blocking call on the shared client; `threaded` runs it in a
worker thread, so the event loop never waits on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import Any, Awaitable, Callable, Iterator, ParamSpec, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import api, clients

MERGE_PATCH = "application/merge-patch+json"
P = ParamSpec("P")
R = TypeVar("R")


def threaded(call: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(call)
    async def in_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(call, *args, **kwargs)
    return in_thread


@contextlib.contextmanager
def tolerating(status: int) -> Iterator[None]:
    """Swallow an ApiException of one status code (404: already gone, 409: already there)."""
    try:
        yield
    except ApiException as error:
        if error.status != status:
            raise


def _found(status: int, call: Callable[[], Any]) -> bool:
    """True when `call` succeeded, False when it failed with `status`."""
    try:
        call()
        return True
    except ApiException as error:
        if error.status == status:
            return False
        raise


@threaded
def create_secret_once(body: dict[str, Any]) -> bool:
    """Create the Secret unless it exists (never overwrite a password); True when created now."""
    return _found(409, lambda: clients.send(clients.core().create_namespaced_secret, body["metadata"]["namespace"],
                                            body))


@threaded
def read_secret(namespace: str, name: str) -> dict[str, Any] | None:
    """A user-named Secret, to check its keys (the only Secret the operator reads)."""
    with tolerating(404):
        return clients.raw(clients.core().read_namespaced_secret, name, namespace)
    return None


@threaded
def label_pod(namespace: str, name: str, key: str, value: str) -> None:
    with tolerating(404):  # a pod that just went away needs no label
        clients.send(clients.core().patch_namespaced_pod, name, namespace, {"metadata": {"labels": {key: value}}},
                     _content_type=MERGE_PATCH)


@threaded
def patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """A merge patch of .status: it carries no resourceVersion, so it cannot conflict."""
    with tolerating(404):  # the MyDatabase (or its namespace) is gone: nothing to report on
        clients.send(clients.custom().patch_namespaced_custom_object_status, api.GROUP, api.VERSION, namespace,
                     api.PLURAL, name, {"status": status}, _content_type=MERGE_PATCH)


@threaded
def delete_claims(namespace: str, release: str) -> list[str]:
    """Delete the database's PersistentVolumeClaims (data and backups); returns their names."""
    core = clients.core()
    selector = api.label_selector(api.selector_labels(release))
    names = [c["metadata"]["name"] for c in clients.raw(
        core.list_namespaced_persistent_volume_claim, namespace, label_selector=selector)["items"]]
    for name in names:
        with tolerating(404):
            core.delete_namespaced_persistent_volume_claim(name, namespace)
    return names


@threaded
def delete_secret(namespace: str, name: str) -> None:
    with tolerating(404):
        clients.core().delete_namespaced_secret(name, namespace)


@threaded
def storage_class(name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.raw(clients.storage().read_storage_class, name)
    return None


@threaded
def default_storage_class() -> dict[str, Any] | None:
    for item in clients.raw(clients.storage().list_storage_class)["items"]:
        if (item["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true":
            return item
    return None


@threaded
def grow_claim(namespace: str, name: str, size: str) -> None:
    clients.send(clients.core().patch_namespaced_persistent_volume_claim, name, namespace,
                 {"spec": {"resources": {"requests": {"storage": size}}}}, _content_type=MERGE_PATCH)


@threaded
def orphan_statefulset(namespace: str, name: str, timeout: float = 60.0) -> None:
    """Delete the StatefulSet but not its pods, so Helm can re-create it with a new claim template."""
    apps = clients.apps()
    with tolerating(404):
        apps.delete_namespaced_stateful_set(name, namespace, body=client.V1DeleteOptions(propagation_policy="Orphan"))
    # The garbage collector first frees the pods (the orphan finalizer); Helm
    # cannot re-create the StatefulSet while the old one is still terminating.
    deadline = time.monotonic() + timeout
    while _found(404, lambda: apps.read_namespaced_stateful_set(name, namespace)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after {timeout:.0f}s")
        time.sleep(0.5)


@threaded
def read_statefulset(namespace: str, name: str) -> dict[str, Any] | None:
    with tolerating(404):
        return clients.raw(clients.apps().read_namespaced_stateful_set, name, namespace)
    return None


@threaded
def claim_exists(namespace: str, name: str) -> bool:
    return _found(404, lambda: clients.send(clients.core().read_namespaced_persistent_volume_claim, name, namespace))


@threaded
def create_job_once(body: dict[str, Any]) -> bool:
    """Create the Job unless it exists (made for this request before a restart); True when created now."""
    return _found(409, lambda: clients.send(clients.batch().create_namespaced_job, body["metadata"]["namespace"],
                                            body))
