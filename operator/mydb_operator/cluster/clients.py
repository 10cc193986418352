"""One shared Kubernetes API client for every call the operator makes.

A client per call costs a TLS handshake and leaves a connection pool behind
(memory grew with every reconcile); one client reuses its connections."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from .. import names


@functools.cache
def shared() -> client.ApiClient:
    """Made on first use, after the operator has loaded its kubeconfig or in-cluster config."""
    api = client.ApiClient()
    api.user_agent = names.USER_AGENT
    return api


def core() -> client.CoreV1Api:
    return client.CoreV1Api(shared())


def apps() -> client.AppsV1Api:
    return client.AppsV1Api(shared())


def batch() -> client.BatchV1Api:
    return client.BatchV1Api(shared())


def storage() -> client.StorageV1Api:
    return client.StorageV1Api(shared())


def custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(shared())


def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The API's JSON as plain dicts: no model objects built only to be turned back into dicts."""
    body: dict[str, Any] = json.loads(call(*args, _preload_content=False, **kwargs).data)
    return body


def send(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """A write whose answer is not used: the body is drained, so the connection goes back
    to the pool, but never parsed (building a V1Pod for a label patch cost more than the patch)."""
    _ = call(*args, _preload_content=False, **kwargs).data


def load_config() -> None:
    """In a pod, its ServiceAccount; elsewhere the kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
