"""The test cluster of a run: brought up once (another cluster that has the real node paused meanwhile), and what
was done written to the session file (sharing.py) for the run's end to undo.

Standard library only: `make test` starts the cluster with the system's Python while the venv installs (pip keeps
one core busy for 20 to 30 s; the start takes about 20 s of the other), as

    PYTHONPATH=tests python3 -m e2e.bringup        (down: the run's end, when the venv could not be made)

and the `cluster` fixture (tests/conftest.py) calls the same function, which then finds the cluster up.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from . import sharing

REPO = Path(__file__).resolve().parents[2]
CLUSTER_PY = REPO / "hack" / "cluster.py"

# Set before anything reads them (tests/e2e/realnode.py: the registry's port); every subprocess (hack/cluster.py,
# hack/install-dev.sh, the operator) inherits them. The tests' cluster is not the demo's (.cluster, 16400).
os.environ.setdefault("MYDB_CLUSTER_DIR", str(REPO / ".cluster" / "tests"))
os.environ.setdefault("MYDB_CLUSTER_PORT_BASE", "16500")
# The test cluster's Go programs (API server, etcd, controllers, kubelet, containerd) and the kubectl and
# Helm the tests and operators run collect garbage at 5 times their live heap instead of twice: the CPU
# a run is short of, for memory this host has (a soft cap keeps any one of them under 1.5 GiB).
os.environ.setdefault("GOGC", "400")
os.environ.setdefault("GOMEMLIMIT", "1536MiB")

Say = Callable[[str], None]


def bring_up(say: Say) -> Path:
    """Under the cluster lock: pause another cluster that has the real node, start ours if it is not up, record
    both in the session file; return our kubeconfig. A start that fails resumes what it paused and raises."""
    paused = None
    try:
        with sharing.cluster_lock():
            session = sharing.read_session()
            paused = _pause_other_real_node_owner(say)
            kubeconfig, started = _cluster_up()
            sharing.write_session({**session, "started": bool(session.get("started") or started),
                                   "paused": session.get("paused") or paused})
    except (RuntimeError, OSError, subprocess.CalledProcessError):
        if paused:
            resume(paused, say)
        raise
    return kubeconfig


def take_down(say: Say) -> None:
    """The run's end: take down the cluster the run started and resume the one it paused."""
    state = sharing.read_session()
    if not state:
        return
    if state.get("started"):
        subprocess.run([sys.executable, str(CLUSTER_PY), "down"], check=False)
    if state.get("paused"):
        resume(state["paused"], say)
    sharing.forget_session()


def _cluster_up() -> tuple[Path, bool]:
    """Start the cluster if needed; return (kubeconfig, whether we started it)."""
    already = subprocess.run([sys.executable, str(CLUSTER_PY), "status"], capture_output=True).returncode == 0
    result = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], text=True, capture_output=True)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"the local control plane did not start:\n{result.stderr}\n{result.stdout}")
    match = re.search(r"^export KUBECONFIG=(.+)$", result.stdout, re.M)
    if not match:
        raise RuntimeError(f"hack/cluster.py up did not say where the kubeconfig is:\n{result.stdout}")
    return Path(match.group(1)), not already


def _pause_other_real_node_owner(say: Say) -> dict[str, str] | None:
    """Stop (keeping its state) another running cluster that has the host's real node; return its environment."""
    found = subprocess.run([sys.executable, str(CLUSTER_PY), "real-node-owner"], capture_output=True, text=True)
    if found.returncode != 0:
        return None
    other = dict(line.split("=", 1) for line in found.stdout.split())
    say(f"pausing the cluster in {other['MYDB_CLUSTER_DIR']} while the tests have the real node "
        "(hack/cluster.py stop; it is resumed after the tests)")
    subprocess.run([sys.executable, str(CLUSTER_PY), "stop"], env={**os.environ, **other}, check=True,
                   capture_output=True)
    return other


def resume(other: dict[str, str], say: Say) -> None:
    say(f"resuming the cluster in {other['MYDB_CLUSTER_DIR']}")
    result = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], env={**os.environ, **other},
                            capture_output=True, text=True)
    if result.returncode != 0:
        again = " ".join(f"{key}={value}" for key, value in other.items()) + " python3 hack/cluster.py up"
        say(f"could not resume it ({result.stderr.strip()[-300:]}); `{again}` tries again")


def main(argv: list[str]) -> int:
    """`up` (the default) or `down`: what the `cluster` fixture and the run's end do, for `make test`."""
    def say(line: str) -> None:
        print(f"[cluster] {line}", file=sys.stderr)
    if argv[1:] == ["down"]:
        take_down(say)
        return 0
    try:
        say(f"up: {bring_up(say)}")
    except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
        say(f"could not start it here (the tests try again and say why): {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
