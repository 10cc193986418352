"""The namespace every test gets, made (ready for pods) and deleted through the API server itself, over one kept
connection.

kubectl made each in two calls (create, then label) and deleted it in a third: some 300 processes a run,
each about 0.05 s of CPU and a TLS handshake on 2 cores the cluster under test needs."""

from __future__ import annotations

import functools
import time
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


@functools.lru_cache(maxsize=4)
def _core(kubeconfig: str, written: float) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))


def core(kubeconfig: Path) -> client.CoreV1Api:
    """One client per kubeconfig as it is now: a cluster brought up again writes new credentials."""
    return _core(str(kubeconfig), kubeconfig.stat().st_mtime)


def create_namespace(kubeconfig: Path, name: str, labels: dict[str, str], timeout: float = 30) -> None:
    """Create NAME and wait until it is ready for pods: controllers add its default ServiceAccount and its
    kube-root-ca.crt ConfigMap a moment after, and a pod created before its ServiceAccount is refused."""
    api = core(kubeconfig)
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)),
                         _request_timeout=60)
    deadline = time.monotonic() + timeout
    while not _ready_for_pods(api, name):
        if time.monotonic() > deadline:
            raise AssertionError(f"namespace {name}: no default ServiceAccount or kube-root-ca.crt "
                                 f"after {timeout:.0f}s")
        time.sleep(0.05)


def _ready_for_pods(api: client.CoreV1Api, namespace: str) -> bool:
    try:
        api.read_namespaced_service_account("default", namespace, _request_timeout=10)
        api.read_namespaced_config_map("kube-root-ca.crt", namespace, _request_timeout=10)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def delete_namespace(kubeconfig: Path, name: str) -> None:
    """Delete NAME without waiting for its contents to go (kubectl delete namespace --wait=false)."""
    try:
        core(kubeconfig).delete_namespace(name, propagation_policy="Background", _request_timeout=60)
    except ApiException as error:
        if error.status != 404:
            raise
