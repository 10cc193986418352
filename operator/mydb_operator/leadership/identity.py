"""Who this instance is, and in which namespace its Lease lives by default."""

from __future__ import annotations

import os
import socket

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_identity(pod_name: str | None) -> str:
    """The pod's name (POD_NAME, read by commands/settings.py), else this host and process."""
    return pod_name or f"{socket.gethostname()}-{os.getpid()}"


def choose_lease_namespace(
    pod_namespace: str | None, service_account_namespace: str | None, kubeconfig_namespace: str | None
) -> str:
    """The first namespace that says where this instance runs; "default" exists in every cluster."""
    return pod_namespace or service_account_namespace or kubeconfig_namespace or "default"


def pod_namespace(given: str | None) -> str | None:
    """The namespace this instance's pod runs in (POD_NAMESPACE, else its service account's); None outside a
    pod."""
    if given:
        return given
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as file:
            return file.read().strip() or None
    except OSError:
        return None


def default_namespace(pod_namespace: str | None) -> str:
    """The pod's namespace (POD_NAMESPACE or --leader-lease-namespace, resolved by commands/settings.py),
    else the pod's service-account namespace, else the current kubeconfig context's."""
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as file:
            service_account_namespace: str | None = file.read().strip()
    except OSError:
        service_account_namespace = None
    return choose_lease_namespace(
        pod_namespace,
        service_account_namespace,
        None if pod_namespace or service_account_namespace else kubeconfig_namespace(),
    )


def kubeconfig_namespace() -> str | None:
    import kubernetes

    try:
        _, current = kubernetes.config.list_kube_config_contexts()
    except (kubernetes.config.ConfigException, OSError, ValueError):
        return None
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None
