"""How pytest-xdist workers share one local cluster.

`make test` runs the suite twice over one cluster: every test not marked
`serial` across several workers (`pytest -n`), then the `serial` ones alone.
Each worker runs its own operator, scoped to the namespaces whose names start
with the worker's name (`gw0-*`), under a Lease of its own; every namespace a
test makes starts with that name, so a worker's operator sees only its own
tests' databases and two workers' operators never overlap. Without xdist the
prefix is empty and the operator manages every namespace, as before.

Set-ups that change the cluster as a whole (bringing it up, the CRD and RBAC,
the charts in the registry) run under one file lock. The first process to
bring the cluster up writes what it did (started it, paused another cluster)
to a session file; the process that ends the run (pytest's controller, never a
worker) reads it to take the cluster down and resume the other one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under xdist; "" otherwise
PREFIX = f"{WORKER}-" if WORKER else ""
# A worker's tests on the real node get namespaces of their own (`rgw0-*`), managed by a second operator
# of the worker whose platform config puts databases there; a test that runs an operator of its own (its
# chart, its platform config, its metrics) gets one outside both (`ogw0-*`), so the worker's operators go
# on beside it. "gw0-*", "rgw0-*" and "ogw0-*" never meet.
REAL_PREFIX = f"r{WORKER}-" if WORKER else ""
OWN_PREFIX = f"o{WORKER}-" if WORKER else ""
# What the API server alone decides (admission, tests marked `no_operator`) goes to namespaces no operator
# watches (`ngw0-*`): in the shared operator's, each accepted MyDatabase was installed by Helm, and
# uninstalled again as its namespace went, some 50 databases a run that no test looked at.
UNWATCHED_PREFIX = f"n{WORKER}-" if WORKER else ""


def cluster_dir() -> Path:
    return Path(os.environ["MYDB_CLUSTER_DIR"])


def namespace_name(stem: str, prefix: str = PREFIX) -> str:
    """A new namespace name for `stem`: the worker's prefix (PREFIX, REAL_PREFIX, OWN_PREFIX or
    UNWATCHED_PREFIX), the stem cut to fit, a random tail."""
    stem = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:40].strip("-")
    return f"{prefix}{stem}-{uuid.uuid4().hex[:5]}"


def create_namespace(cluster, stem: str, *labels: str, prefix: str = PREFIX) -> str:
    """Create and label (mydb.test/e2e=true, plus `labels`) a namespace of this worker; return its name."""
    from . import apiwrites  # here: bringup.py imports this module under the system's Python, without the venv

    name = namespace_name(stem, prefix)
    apiwrites.create_namespace(cluster.kubeconfig, name, dict(label.split("=", 1) for label in
                                                             ("mydb.test/e2e=true", *labels)))
    return name


def operator_scope(prefix: str = PREFIX) -> list[str]:
    """The `run` arguments that scope this worker's operator (PREFIX) or its real-node one (REAL_PREFIX):
    none (all namespaces) without xdist."""
    return ["-n", f"{prefix}*"] if WORKER else []


def beside_the_shared_operator(namespace: str) -> bool:
    """Whether an operator for this namespace alone can run beside the worker's (outside its scope)."""
    return bool(WORKER) and not namespace.startswith(PREFIX)


def lease_name(base: str = "mydb-operator") -> str:
    return f"{base}-{WORKER}" if WORKER else base


@contextlib.contextmanager
def cluster_lock() -> Iterator[None]:
    """Held while one process changes what every worker shares."""
    path = cluster_dir().with_name(cluster_dir().name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _session_file() -> Path:
    return cluster_dir().with_name(cluster_dir().name + ".session.json")


def read_session() -> dict:
    """{"started": whether the tests started the cluster, "paused": the environment of a cluster they paused,
    "installed": what the CRD and RBAC were installed from (installed())}."""
    try:
        return json.loads(_session_file().read_text())
    except (OSError, ValueError):
        return {}


def write_session(session: dict) -> None:
    _session_file().write_text(json.dumps(session))


def forget_session() -> None:
    _session_file().unlink(missing_ok=True)


REPO = Path(__file__).resolve().parents[2]
# What hack/install-dev.sh installs from: a change to any of it installs again.
INSTALLED_FROM = ("crds", "charts/mydatabase-operator", "hack/install-dev.sh")


def _installation(kubeconfig: Path) -> str:
    """The CRD and RBAC as hack/install-dev.sh would install them now, on this cluster (its CA: a cluster made
    anew has another; a paused one resumed keeps it, and its objects), with its kubeconfig there."""
    digest = hashlib.sha256(str(kubeconfig).encode())
    for part in [kubeconfig.parent / "state" / "pki" / "ca.crt", *(REPO / root for root in INSTALLED_FROM)]:
        for path in sorted([part] if part.is_file() else part.rglob("*")):
            if path.is_file():
                digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def installed(kubeconfig: Path) -> bool:
    """Whether this run already installed the CRD and RBAC on the shared cluster as they are now (call under
    the cluster lock): the workers after the first and the serial pass need not again (7 programs, 3 CPU-s
    and up to 14 s under the lock, each)."""
    return kubeconfig.exists() and read_session().get("installed") == _installation(kubeconfig)


def record_installed(kubeconfig: Path) -> None:
    write_session({**read_session(), "installed": _installation(kubeconfig)})
