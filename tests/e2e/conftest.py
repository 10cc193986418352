"""The operator under test: CRD and RBAC installed, running as a process under its own ServiceAccount.

The token comes from the TokenRequest API for the ServiceAccount that
charts/mydatabase-operator creates, so every call the operator (and the Helm
it runs) makes is checked against the RBAC that chart ships, not admin's.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from . import sharing
from .apicommands import wait_for_condition
from .realnode import REGISTRY, local_node_platform
from .waiting import get_json, wait_for

REPO = Path(__file__).resolve().parents[2]


@dataclass
class OperatorProcess:
    cluster: object
    kubeconfig: Path
    log_path: Path
    resync: float = 10.0
    process: subprocess.Popen | None = None
    starts: int = field(default=0)
    metrics_port: int = 0
    env: dict[str, str] = field(default_factory=dict)  # extra environment, e.g. MYDB_CHART_DIR
    # Extra `run` arguments, e.g. ["-n", NAMESPACE]; by default this worker's namespaces (sharing.py).
    args: list[str] = field(default_factory=sharing.operator_scope)
    # The operator elects a leader by default. Its Lease goes where the ServiceAccount
    # of hack/install-dev.sh may write one (the kubeconfig names no namespace), and
    # lasts 10 s so that a start after a SIGKILL leads within seconds (a SIGTERM
    # releases the Lease at once), while the renewals (every 3.3 s, each operator
    # the whole pass) stay few: at 5 s they were the API server's most frequent write.
    # Every instance of a worker shares its Lease unless a test names another: one
    # stands by while the other runs.
    lease_namespace: str = "mydb-system"
    lease_name: str = field(default_factory=sharing.lease_name)
    lease_seconds: int = 10
    health_port: int = 0  # /healthz (a standby's says whom it waits for); 0: off

    def start(self, wait: bool = True) -> None:
        """Start the operator; with wait, return once it leads and has loaded its chart (a standby never does)."""
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "MYDB_HELM": self.cluster.tool("helm"),
            "PATH": f"{self.cluster.bin_dir}:{os.environ['PATH']}",
            "HELM_CACHE_HOME": str(self.log_path.parent / "helm-cache"),
            "HELM_CONFIG_HOME": str(self.log_path.parent / "helm-config"),
            **self.env,
        }
        self.starts += 1
        log = open(self.log_path, "a")
        log.write(f"\n===== operator start #{self.starts} =====\n")
        log.flush()
        self.metrics_port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mydb_operator.cli", "run", "--health-port", str(self.health_port),
             "--resync", str(self.resync), "--metrics-port", str(self.metrics_port),
             "--leader-lease-namespace", self.lease_namespace, "--leader-lease-name", self.lease_name,
             "--leader-lease-seconds", str(self.lease_seconds), *self.args],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
        )
        if wait:
            wait_for("operator start-up", lambda: "chart " in self.log_since_start()
                     or self.process.poll() is not None, timeout=60)
        assert self.process.poll() is None, f"the operator exited:\n{self.log_since_start()}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                if sig == signal.SIGTERM:
                    # Killed, it could not release its Lease: an instance under another Lease
                    # would be refused (overlapping scope) until the Lease expires.
                    time.sleep(self.lease_seconds + 1)

    def restart(self) -> None:
        self.stop()
        self.start()

    def crash(self) -> list[int]:
        """SIGKILL the operator and every process it started (its Helm runs), as a container kill would.

        The operator is frozen first so that it cannot start another Helm while
        its children are collected; returns the pids of the children killed."""
        if not self.process or self.process.poll() is not None:
            return []
        self.process.send_signal(signal.SIGSTOP)
        children = descendants(self.process.pid)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.stop(signal.SIGKILL)
        return children

    def log_since_start(self) -> str:
        text = self.log_path.read_text(errors="replace")
        return text.rsplit(f"===== operator start #{self.starts} =====", 1)[-1]


@contextlib.contextmanager
def operator_instead(operator: OperatorProcess, namespace: str, log_name: str, *, args: Sequence[str] = (),
                     resync: float = OperatorProcess.resync, **env: str):
    """Run a second operator (own log, own environment, this namespace only).

    For a namespace outside the shared operator's scope (a test marked `own_operator`
    under xdist: sharing.py) it runs beside it, under a Lease of its own. Otherwise the
    shared one is stopped meanwhile, and the second takes its Lease, which that one
    released on its way out; it is started again afterwards, so the other tests keep
    working."""
    beside = sharing.beside_the_shared_operator(namespace)
    own = OperatorProcess(cluster=operator.cluster, kubeconfig=operator.kubeconfig,
                          log_path=operator.log_path.parent / log_name, env=env, args=["-n", namespace, *args],
                          resync=resync)
    if beside:
        own.lease_name = sharing.lease_name(f"mydb-{log_name.removesuffix('.log')}")
    else:
        operator.stop()
    try:
        own.start()
        yield own
    finally:
        own.stop()
        if not beside:
            operator.start()


def lease_free(cluster, namespace: str, name: str) -> bool:
    """Nobody holds the Lease: released, not renewed for its duration, or never made."""
    spec = get_json(cluster, "-n", namespace, "lease", name).get("spec") or {}
    if not spec.get("holderIdentity") or not spec.get("renewTime"):
        return True
    renewed = datetime.datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00"))
    expires = renewed + datetime.timedelta(seconds=spec.get("leaseDurationSeconds") or 0)
    return expires < datetime.datetime.now(datetime.timezone.utc)


def descendants(pid: int) -> list[int]:
    """The pids of every process below `pid` (children first), read from /proc."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # it just exited
        return found
    for task in tasks:
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def install_crd_and_rbac(cluster, env: dict[str, str] | None = None) -> Path:
    """hack/install-dev.sh: the CRD, the operator chart's RBAC, and a kubeconfig for its ServiceAccount; on the
    shared cluster once a run (sharing.installed). ENV names another cluster than the shared one
    (private_cluster.py)."""
    kubeconfig = cluster.kubeconfig.parent / "operator-e2e.kubeconfig"
    with sharing.cluster_lock():
        if env is None and sharing.installed(kubeconfig):
            return kubeconfig
        subprocess.run(["bash", str(REPO / "hack" / "install-dev.sh"), str(kubeconfig)], check=True,
                       env=env or {**os.environ, "MYDB_CLUSTER_DIR": str(cluster.kubeconfig.parent)})
        if env is None:
            sharing.record_installed(kubeconfig)
    return kubeconfig


@contextlib.contextmanager
def clean_log(handle: OperatorProcess):
    """Run the operator; afterwards, its log of this session must be clean. A traceback is a bug even when
    every test passed; so is a start-up whose informers never finished their first listing (every start
    would wait 20 s for nothing)."""
    handle.log_path.parent.mkdir(parents=True, exist_ok=True)
    earlier_sessions = handle.log_path.stat().st_size if handle.log_path.exists() else 0  # appended to
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()
    text = handle.log_path.read_bytes()[earlier_sessions:].decode(errors="replace")
    assert "Traceback" not in text, f"traceback in {handle.log_path}"
    assert "have not listed every kind" not in text, f"a start-up gave up waiting for the informers: {handle.log_path}"


def worker_log(cluster, name: str) -> Path:
    return cluster.kubeconfig.parent / "logs" / (sharing.WORKER or "main") / name


# The session's shared operator while it runs: a test that needs the cluster alone stops it if a test before it
# started it, and starts none of its own.
SHARED: list[OperatorProcess] = []


@pytest.fixture(scope="session")
def operator_kubeconfig(cluster) -> Path:
    """The CRD and the operator chart's RBAC installed; the kubeconfig of its ServiceAccount."""
    return install_crd_and_rbac(cluster)


@pytest.fixture(scope="session")
def operator(cluster, operator_kubeconfig):
    with clean_log(OperatorProcess(cluster=cluster, kubeconfig=operator_kubeconfig,
                                   log_path=worker_log(cluster, "operator-e2e.log"))) as handle:
        SHARED.append(handle)
        yield handle
        SHARED.remove(handle)


def stop_the_shared_operator() -> None:
    """Before a test takes the cluster away: the shared operator, if one runs, would only log its absence."""
    for handle in SHARED:
        handle.stop()


@pytest.fixture(scope="session")
def real_node_operator(cluster, operator, tmp_path_factory):
    """Under xdist: this worker's second operator, beside the shared one for the whole session, managing
    the worker's real-node namespaces (sharing.REAL_PREFIX) under a platform config that puts databases
    on the real node. Started once: a test of its own would stop and start two operators (12-28 s)."""
    platform = tmp_path_factory.mktemp("real-node") / "platform.yaml"
    platform.write_text(yaml.safe_dump(local_node_platform()))
    handle = OperatorProcess(cluster=cluster, kubeconfig=operator.kubeconfig,
                             log_path=worker_log(cluster, "operator-real-postgres.log"),
                             env={"MYDB_PLATFORM_CONFIG": str(platform)},
                             args=sharing.operator_scope(sharing.REAL_PREFIX),
                             lease_name=sharing.lease_name("mydb-operator-real"))
    with clean_log(handle):
        yield handle


def wait_ready(cluster, namespace: str, name: str, timeout: float = 120) -> None:
    """kubectl wait --for=condition=Ready mydb/NAME, by one watch from this process (apicommands.py)."""
    started = time.monotonic()
    ready, why_not = wait_for_condition(cluster.kubeconfig, "mydb", namespace, name, "Ready", timeout)
    assert ready, (
        f"mydb/{name} not Ready after {time.monotonic() - started:.0f}s: {why_not}\n"
        + cluster.kubectl("get", "-n", namespace, f"mydb/{name}", "-o", "yaml", check=False).stdout
    )


@pytest.fixture
def real_operator(request, cluster, operator_kubeconfig, namespace, tmp_path):
    """An operator for this namespace whose platform config puts databases on the real node: the worker's
    real-node operator under xdist (the namespace fixture gave this test a real-node namespace), else one
    that stands in for the shared operator during the test, or (the serial pass, where no test has started
    the shared one) one of its own, the shared one never started only to be stopped."""
    if sharing.WORKER:
        yield request.getfixturevalue("real_node_operator")
        return
    platform = tmp_path / "platform.yaml"
    platform.write_text(yaml.safe_dump(local_node_platform()))
    if SHARED:
        with operator_instead(SHARED[0], namespace, "operator-real-postgres.log",
                              MYDB_PLATFORM_CONFIG=str(platform)) as own:
            yield own
        return
    with clean_log(OperatorProcess(cluster=cluster, kubeconfig=operator_kubeconfig,
                                   log_path=worker_log(cluster, "operator-real-postgres.log"),
                                   env={"MYDB_PLATFORM_CONFIG": str(platform)}, args=["-n", namespace])) as own:
        yield own


def chart_version(chart: str) -> str:
    return str(yaml.safe_load((REPO / "charts" / chart / "Chart.yaml").read_text())["version"])


@pytest.fixture(scope="module")
def published(cluster) -> str:
    """The project's charts in the registry the cluster's real node runs; returns the database chart's version."""
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5).close()
    except OSError as error:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and no registry at {REGISTRY} (the real node runs it): {error}", pytrace=False)
        pytest.skip(f"no registry at {REGISTRY} (the real node runs it): {error}")
    with sharing.cluster_lock():
        result = subprocess.run(["bash", str(REPO / "hack" / "publish-charts.sh"), REGISTRY],
                                capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"charts: pushed oci://{REGISTRY}/charts/mydatabase:{chart_version('mydatabase')}",
        f"charts: pushed oci://{REGISTRY}/charts/mydatabase-operator:{chart_version('mydatabase-operator')}",
    ]
    return chart_version("mydatabase")
