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


def test_a_component_this_process_started_is_judged_by_its_process_not_its_cmdline(tmp_path: Path) -> None:
    """Just after exec a child's /proc/PID/cmdline can be empty, which running_pid takes for a reused pid: a
    cold CI run once reported kube-router "exited while starting (ended)" while it ran. What this process
    started is alive while its process is; how it ended is then told."""
    probe = """
import os, signal, time, harness
harness.LOG_DIR.mkdir(parents=True); harness.PID_DIR.mkdir(parents=True)
harness.start("sleeper", ["sleep", "30"])  # the executable is not named "sleeper": running_pid cannot see it
print(harness.alive("sleeper"), harness.running_pid("sleeper"))
os.kill(harness.STARTED["sleeper"].pid, signal.SIGTERM)
harness.STARTED["sleeper"].wait()
print(harness.alive("sleeper"), harness.how_it_ended("sleeper"))
"""
    printed = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                             env={**os.environ, "MYDB_CLUSTER_DIR": str(tmp_path), "PYTHONPATH": str(REPO / "hack")})
    assert printed.stdout.splitlines() == ["True None", "False killed by SIGTERM"]
