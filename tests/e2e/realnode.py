"""Pods on the real node: its name, its taint, the images the local registry serves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
NODE_NAME = "mydb-real-node"
NODE_LABEL = "node.mydb.local/real"
NODE_IP = "198.18.128.1"
BRIDGE = "mydb0"
BRIDGE_MAC = "02:00:c6:12:80:01"  # hack/node_network.py sets it
REGISTRY = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"


def images() -> dict[str, str]:
    """KEY -> full reference in the local registry (POSTGRES_IMAGE, OPERATOR_IMAGE, ...), from hack/images.sh list."""
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


def local_node_platform() -> dict:
    """examples/platform-local-node.yaml, pointed at this cluster's registry (its port base may differ)."""
    config = yaml.safe_load((REPO / "examples" / "platform-local-node.yaml").read_text())
    config["values"]["image"]["registry"] = REGISTRY
    return config
