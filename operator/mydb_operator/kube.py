"""Every write the operator makes to the API, each a small blocking call run in a thread."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import api, clients

log = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"


def _create_secret_once(body: dict[str, Any]) -> bool:
    try:
        clients.core().create_namespaced_secret(body["metadata"]["namespace"], body)
        return True
    except ApiException as error:
        if error.status == 409:  # it exists: never overwrite a password
            return False
        raise


async def create_secret_once(body: dict[str, Any]) -> bool:
    """Create the Secret unless it exists; True when it was created now."""
    return await asyncio.to_thread(_create_secret_once, body)


def _read_secret(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return clients.raw(clients.core().read_namespaced_secret, name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


async def read_secret(namespace: str, name: str) -> dict[str, Any] | None:
    """A user-named Secret, to check its keys (the only Secret the operator reads)."""
    return await asyncio.to_thread(_read_secret, namespace, name)


def _label_pod(namespace: str, name: str, key: str, value: str) -> None:
    try:
        clients.core().patch_namespaced_pod(
            name, namespace, {"metadata": {"labels": {key: value}}}, _content_type=MERGE_PATCH
        )
    except ApiException as error:
        if error.status != 404:  # a pod that just went away needs no label
            raise


async def label_pod(namespace: str, name: str, key: str, value: str) -> None:
    await asyncio.to_thread(_label_pod, namespace, name, key, value)


def _patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    try:
        _merge_status(namespace, name, status)
    except ApiException as error:
        if error.status != 404:  # the MyDatabase (or its namespace) is gone: nothing to report on
            raise


def _merge_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    clients.custom().patch_namespaced_custom_object_status(
        api.GROUP, api.VERSION, namespace, api.PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


async def patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """A merge patch of .status: it carries no resourceVersion, so it cannot conflict."""
    await asyncio.to_thread(_patch_status, namespace, name, status)


def _delete_claims(namespace: str, release: str) -> list[str]:
    core = clients.core()
    selector = api.label_selector(api.selector_labels(release))
    names = [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(
        namespace, label_selector=selector).items]
    for name in names:
        try:
            core.delete_namespaced_persistent_volume_claim(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
    return names


async def delete_claims(namespace: str, release: str) -> list[str]:
    """Delete the database's PersistentVolumeClaims (data and backups); returns their names."""
    return await asyncio.to_thread(_delete_claims, namespace, release)


def _delete_secret(namespace: str, name: str) -> None:
    try:
        clients.core().delete_namespaced_secret(name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise


async def delete_secret(namespace: str, name: str) -> None:
    await asyncio.to_thread(_delete_secret, namespace, name)


def _storage_class(name: str) -> dict[str, Any] | None:
    try:
        return clients.raw(clients.storage().read_storage_class, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


async def storage_class(name: str) -> dict[str, Any] | None:
    return await asyncio.to_thread(_storage_class, name)


def _default_storage_class() -> dict[str, Any] | None:
    for item in clients.raw(clients.storage().list_storage_class)["items"]:
        if (item["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true":
            return item
    return None


async def default_storage_class() -> dict[str, Any] | None:
    return await asyncio.to_thread(_default_storage_class)


def _grow_claim(namespace: str, name: str, size: str) -> None:
    clients.core().patch_namespaced_persistent_volume_claim(
        name, namespace, {"spec": {"resources": {"requests": {"storage": size}}}}, _content_type=MERGE_PATCH
    )


async def grow_claim(namespace: str, name: str, size: str) -> None:
    await asyncio.to_thread(_grow_claim, namespace, name, size)


def _orphan_statefulset(namespace: str, name: str, timeout: float = 60.0) -> None:
    apps = clients.apps()
    try:
        apps.delete_namespaced_stateful_set(name, namespace, body=client.V1DeleteOptions(propagation_policy="Orphan"))
    except ApiException as error:
        if error.status != 404:
            raise
    # The garbage collector first frees the pods (the orphan finalizer); Helm
    # cannot re-create the StatefulSet while the old one is still terminating.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            apps.read_namespaced_stateful_set(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(0.5)
    raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after {timeout:.0f}s")


async def orphan_statefulset(namespace: str, name: str) -> None:
    """Delete the StatefulSet but not its pods, so Helm can re-create it with a new claim template."""
    await asyncio.to_thread(_orphan_statefulset, namespace, name)


def _claim_exists(namespace: str, name: str) -> bool:
    try:
        clients.core().read_namespaced_persistent_volume_claim(name, namespace)
        return True
    except ApiException as error:
        if error.status == 404:
            return False
        raise


async def claim_exists(namespace: str, name: str) -> bool:
    return await asyncio.to_thread(_claim_exists, namespace, name)


def _create_job_once(body: dict[str, Any]) -> bool:
    try:
        clients.batch().create_namespaced_job(body["metadata"]["namespace"], body)
        return True
    except ApiException as error:
        if error.status == 409:  # made for this request already (the operator restarted in between)
            return False
        raise


async def create_job_once(body: dict[str, Any]) -> bool:
    return await asyncio.to_thread(_create_job_once, body)
