"""Pods on the real nodes: their names, addresses and taint, the images the local registry serves."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))  # the nodes' layout, as the harness makes them
from node_layout import HOST_BRIDGE, HOST_BRIDGE_MAC, HOST_IP, NODE_LABEL, RealNode, real_nodes  # noqa: E402

REAL_NODES = real_nodes()
NODE_NAMES = [node.name for node in REAL_NODES]
REGISTRY = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"


def real_node(name: str) -> RealNode:
    """The real node called NAME (a pod's spec.nodeName)."""
    return next(node for node in REAL_NODES if node.name == name)


MANIFESTS = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def registry_digest(repository: str, tag: str) -> str:
    """The digest the local registry serves REPOSITORY:TAG under, as a runtime pulling by digest asks for it."""
    request = urllib.request.Request(f"http://{REGISTRY}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": MANIFESTS})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Docker-Content-Digest"])


def pinned_platform(*tags: str) -> dict:
    """local_node_platform(), pinning library/postgres:TAG for each TAG (all of major 15) by its digest."""
    pins = {tag: registry_digest("library/postgres", tag) for tag in tags}
    return {**local_node_platform(), "majors": [15], "imageDigests": pins}


@functools.cache
def images() -> dict[str, str]:
    """KEY -> full reference in the local registry (POSTGRES_IMAGE, OPERATOR_IMAGE, ...), from hack/images.sh list.
    Once a process: the list is the cluster's start's, and each listing runs buildah eight times (about 1.5 s of
    CPU; some twenty listings a run)."""
    listed = subprocess.run(["bash", str(REPO / "hack" / "images.sh"), "list"], check=True,
                            capture_output=True, text=True).stdout
    return {key: f"{REGISTRY}/{ref}" for key, ref in (line.split("=", 1) for line in listed.split() if "=" in line)}


def on_real_node(pod_spec: dict) -> dict:
    """The pod spec, placed on the real node (its label and its taint)."""
    return {
        **pod_spec,
        "nodeSelector": {NODE_LABEL: "true"},
        "tolerations": [{"key": NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    }


def local_node_platform(operator_on_host: bool = True) -> dict:
    """examples/platform-local-node.yaml, pointed at this cluster's registry (its port base may differ). An operator
    outside the cluster (OPERATOR_ON_HOST: the tests run it on the host) connects to the servers from the host's
    address on the nodes' bridge, which no node's NetworkPolicy engine takes for its own: the platform admits it,
    as a platform running its operator outside the cluster would admit that operator's address."""
    config = yaml.safe_load((REPO / "examples" / "platform-local-node.yaml").read_text())
    config["values"]["image"]["registry"] = REGISTRY
    if operator_on_host:
        config["values"]["networkPolicy"] = {"operator": [{"ipBlock": {"cidr": f"{HOST_IP}/32"}}]}
    return config
