"""A control plane of a test's own, kwok nodes only, beside the shared one.

A test that restarts the API server would otherwise need the shared cluster
alone (the serial pass), every worker's operator and kubectl losing it too. On
a cluster of its own it runs in the parallel pass: `hack/cluster.py up` with
MYDB_REAL_NODE=0 starts etcd, the control plane, kwok and the volume agent in
about 5 s. Its folder is under the shared cluster's, so its logs stay with
the run's; `down` removes its state and keeps them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_PY = REPO / "hack" / "cluster.py"


@dataclasses.dataclass(frozen=True)
class PrivateCluster:
    cluster: object  # tests/conftest.Cluster, with this control plane's kubeconfig
    env: dict[str, str]  # what hack/cluster.py and hack/install-dev.sh need to find it

    def run(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(CLUSTER_PY), command], env=self.env, capture_output=True,
                              text=True, timeout=300)


@contextlib.contextmanager
def private_cluster(shared, name: str, port_base: int) -> Iterator[PrivateCluster]:
    """Start a kwok-only cluster NAME on ports from PORT_BASE (one the suite gives no other cluster); yield it;
    take it down, whatever happened."""
    folder = shared.kubeconfig.parent / "private" / name
    env = {**os.environ, "MYDB_CLUSTER_DIR": str(folder), "MYDB_CLUSTER_PORT_BASE": str(port_base),
           "MYDB_REAL_NODE": "0"}
    own = PrivateCluster(dataclasses.replace(shared, kubeconfig=folder / "admin.kubeconfig"), env)
    try:
        own.run("down")  # a run killed midway may have left it: start from nothing
        up = own.run("up")
        assert up.returncode == 0, f"the private cluster {name} did not start:\n{up.stderr}"
        yield own
    finally:
        down = own.run("down")
        assert down.returncode == 0, down.stderr
