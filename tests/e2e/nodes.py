"""Faults of one real node, made by the harness (`hack/cluster.py node lose|freeze|cut|drain|back N`)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .realnode import REPO, RealNode, real_node
from .waiting import get_json

CLUSTER_PY = REPO / "hack" / "cluster.py"


def node_of(cluster, namespace: str, pod: str) -> RealNode:
    """The real node POD runs on."""
    return real_node(get_json(cluster, "-n", namespace, "pod", pod)["spec"]["nodeName"])


def harness_node(action: str, node: RealNode) -> None:
    done = subprocess.run([sys.executable, str(CLUSTER_PY), "node", action, str(node.index)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"node {action} {node.name}: {done.stderr}"


@contextmanager
def node_fault(action: str, node: RealNode) -> Iterator[float]:
    """NODE lost, frozen, cut or drained (ACTION) until the block ends, then brought back. Yields when the fault
    was complete (time.time())."""
    harness_node(action, node)
    try:
        yield time.time()
    finally:
        harness_node("back", node)
