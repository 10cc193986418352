"""Every write the operator makes to the API, each a small blocking call run in a thread."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import api

log = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"


def _create_secret_once(body: dict[str, Any]) -> bool:
    try:
        client.CoreV1Api().create_namespaced_secret(body["metadata"]["namespace"], body)
        return True
    except ApiException as error:
        if error.status == 409:  # it exists: never overwrite a password
            return False
        raise


async def create_secret_once(body: dict[str, Any]) -> bool:
    """Create the Secret unless it exists; True when it was created now."""
    return await asyncio.to_thread(_create_secret_once, body)


def _label_pod(namespace: str, name: str, key: str, value: str) -> None:
    try:
        client.CoreV1Api().patch_namespaced_pod(
            name, namespace, {"metadata": {"labels": {key: value}}}, _content_type=MERGE_PATCH
        )
    except ApiException as error:
        if error.status != 404:  # a pod that just went away needs no label
            raise


async def label_pod(namespace: str, name: str, key: str, value: str) -> None:
    await asyncio.to_thread(_label_pod, namespace, name, key, value)


def _patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    client.CustomObjectsApi().patch_namespaced_custom_object_status(
        api.GROUP, api.VERSION, namespace, api.PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


async def patch_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """A merge patch of .status: it carries no resourceVersion, so it cannot conflict."""
    await asyncio.to_thread(_patch_status, namespace, name, status)


def _delete_claims(namespace: str, release: str) -> list[str]:
    core = client.CoreV1Api()
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
        client.CoreV1Api().delete_namespaced_secret(name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise


async def delete_secret(namespace: str, name: str) -> None:
    await asyncio.to_thread(_delete_secret, namespace, name)
