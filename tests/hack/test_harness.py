"""hack/harness.py: where a cluster's files live."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_relative_cluster_dir_is_made_absolute(tmp_path: Path) -> None:
    """The kubelet's config names files under the cluster's folder and reads a relative path from its own
    folder: `MYDB_CLUSTER_DIR=.cluster/tests hack/cluster.py up` looked for state/.cluster/tests/state/pki."""
    probe = "import harness; print(harness.CLUSTER_DIR, harness.PKI_DIR)"
    printed = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                             env={**os.environ, "MYDB_CLUSTER_DIR": "some/where", "PYTHONPATH": str(REPO / "hack")})
    assert printed.stdout.split() == [str(tmp_path / "some/where"), str(tmp_path / "some/where/state/pki")]
