"""Shared fixtures: the local control plane and a namespace per test.

The tests run on a control plane of their own, apart from the one `make demo`
starts: .cluster/tests with ports from 16500 (MYDB_CLUSTER_DIR and
MYDB_CLUSTER_PORT_BASE choose another). The `cluster` fixture uses it if it
runs or starts it (tests/e2e/bringup.py; `make test` starts it while the venv
installs); the run's end stops it again only if
the tests started it (set MYDB_KEEP_CLUSTER=1 to keep it). The host has one
real node: while the tests run, another cluster that has it (the demo's) is
paused with `hack/cluster.py stop`, its state kept, and resumed afterwards.
Under CI=true a control plane that cannot start fails the run; elsewhere the
e2e tests are skipped with the reason, so the unit tests stay usable on a
laptop without Go.

pytest-xdist workers share the cluster (tests/e2e/sharing.py): tests marked
`serial` need it alone and run in a second, single-process pass (`make test`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e import apicommands, apiwrites, bringup, sharing

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    bin_dir: Path

    def tool(self, name: str) -> str:
        return str(self.bin_dir / name)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
        # The commands the tests run most go straight to the API server when its answer is kubectl's.
        result = None if kubeconfig else apicommands.run(self.kubeconfig, args, stdin)
        result = result or subprocess.run(
            [self.tool("kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=stdin, text=True, capture_output=True, timeout=300,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result


def _bin_dir() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack" / "build-tools.sh")], check=True,
                         text=True, capture_output=True).stdout
    return Path(out.strip().splitlines()[-1])


def _reporter_line(config: pytest.Config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter:
            reporter.write_line(f"[cluster] {line}")
    return say


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    say = _reporter_line(request.config)
    try:
        kubeconfig = bringup.bring_up(say)  # a no-op when `make test` started it while the venv installed
        bin_dir = _bin_dir()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
        if IN_CI:
            pytest.fail(f"CI=true and no control plane: {error}", pytrace=False)
        pytest.skip(f"no local control plane: {error}")
    return Cluster(kubeconfig=kubeconfig, bin_dir=bin_dir)


USES_CLUSTER = "mydb_uses_cluster"  # a worker's word to the controller (xdist's workeroutput)
_workers_using_cluster: list[str] = []


def _uses_cluster(session: pytest.Session) -> bool:
    return any("cluster" in getattr(item, "fixturenames", ()) for item in session.items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under xdist the controller collects nothing: each worker says whether the run has cluster tests."""
    output = getattr(session.config, "workeroutput", None)
    if sharing.WORKER and output is not None:
        output[USES_CLUSTER] = _uses_cluster(session)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    if getattr(node, "workeroutput", {}).get(USES_CLUSTER):
        _workers_using_cluster.append(str(node.gateway.id))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's end (the controller under xdist, after every worker): take down the cluster the tests
    started and resume the one they paused, unless MYDB_KEEP_CLUSTER keeps both for a later run. A run without
    cluster tests (units, charts, scripts; `make check` under xdist too) leaves a kept cluster to the run
    that uses it (a `pytest -n 2 tests/postgres` beside a kept cluster used to take it down)."""
    if sharing.WORKER or os.environ.get("MYDB_KEEP_CLUSTER"):
        return
    distributed = bool(session.config.getoption("numprocesses", None))
    if not (_workers_using_cluster if distributed else _uses_cluster(session)):
        return
    bringup.take_down(_reporter_line(session.config))


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for one test (this worker's: tests/e2e/sharing.py), deleted (without waiting) afterwards."""
    name = sharing.create_namespace(cluster, request.node.name, prefix=_namespace_prefix(request))
    yield name
    call = getattr(request.node, "call_report", None)
    if call is not None and call.failed:
        call.sections.append((f"namespace {name} after the failure", _what_happened(cluster, name)))
    if name.startswith(sharing.OWN_PREFIX) and sharing.WORKER:
        _release_finalizers(cluster, name)
    apiwrites.delete_namespace(cluster.kubeconfig, name)


def _release_finalizers(cluster: Cluster, namespace: str) -> None:
    """The test's own operator has stopped: nothing would release its databases' finalizers, and the namespace
    would stay Terminating (its controller listing and deleting every kind in it, over and over)."""
    listed = cluster.kubectl("-n", namespace, "get", "mydb", "-o", "name", check=False).stdout.split()
    for database in listed:
        cluster.kubectl("-n", namespace, "patch", database, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                        check=False)


def _namespace_prefix(request: pytest.FixtureRequest) -> str:
    """The worker's real-node namespaces for tests on real pods, its own-operator ones for tests marked
    `own_operator`, unwatched ones for tests marked `no_operator` (tests/e2e/sharing.py), else its shared
    operator's."""
    if "real_operator" in request.fixturenames:
        return sharing.REAL_PREFIX
    if request.node.get_closest_marker("own_operator"):
        return sharing.OWN_PREFIX
    if request.node.get_closest_marker("no_operator"):
        return sharing.UNWATCHED_PREFIX
    return sharing.PREFIX


def _what_happened(cluster: Cluster, namespace: str) -> str:
    """The namespace's pods, Events and the last lines of every real container's log: what a failed e2e
    test needs to be understood from a CI log alone."""
    parts = []
    for args in (("get", "pods", "-o", "wide"), ("get", "events", "--sort-by=.lastTimestamp")):
        parts.append(cluster.kubectl("-n", namespace, *args, check=False).stdout)
    # kwok's simulated pods have no logs.
    template = '{range .items[?(@.spec.nodeName)]}{.metadata.name} {.spec.nodeName}{"\\n"}{end}'
    placed = cluster.kubectl("-n", namespace, "get", "pods", "-o", f"jsonpath={template}", check=False).stdout
    pods = [line.split()[0] for line in placed.splitlines() if not line.split()[1].startswith("kwok-")]
    for pod in pods:
        log = cluster.kubectl("-n", namespace, "logs", pod, "--all-containers", "--prefix", "--tail=40",
                              check=False)
        parts.append(f"--- {pod}\n{log.stdout}{log.stderr}")
    return "\n".join(parts)


# Modules whose tests share one set-up and run on one xdist worker, in order: test_failover's database and
# operator, test_cluster's ticking CronJob, test_rbac's control plane, the restore and helm-test set-ups, the
# scanners' runs. Every
# other test is a unit of its own. (xdist's own loadgroup renames each item's nodeid, which pytest 9 no
# longer reads: it would split these modules.)
ONE_WORKER_MODULES = frozenset({
    "tests/e2e/test_failover.py",
    "tests/e2e/test_cluster.py",
    "tests/e2e/test_rbac.py",
    "tests/postgres/test_restore.py",
    "tests/postgres/test_restore_on_first_boot.py",
    "tests/postgres/test_helm_test.py",
    "tests/chart/test_scanners.py",
})
assert all((REPO / module).is_file() for module in ONE_WORKER_MODULES), "a module of ONE_WORKER_MODULES is gone"


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Each test to the next free worker, but a module of ONE_WORKER_MODULES whole to one worker; the
    biggest units go first (xdist's loadscope order), so test_failover's long module starts at once."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetUpsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return SharedSetUpsTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that tear the shared cluster down and up again need it alone (`serial`) and run last: every
    fixture built on it (the operator, its CRD and RBAC) would be gone for the tests after them.
    A `serial` test collected by an xdist worker is skipped with the way to run it (a failure under CI)."""
    for item in items:
        if item.get_closest_marker("restarts_cluster"):
            item.add_marker(pytest.mark.serial)
        if sharing.WORKER and item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.skip(reason="needs the cluster alone: run it without -n "
                                                    "(make test runs the serial tests after the others)"))
    items.sort(key=_running_order)


def _running_order(item: pytest.Item) -> tuple[bool, bool, bool, bool]:
    """The tests that restart the cluster last, the one that leaves it down last of all; first the `long` ones, then
    the others on real pods. xdist hands out tests in this order (after the modules kept on one worker), and a long
    test handed out last would end the parallel pass alone: CI's runs spent their last 3 to 4 minutes on 2 cores a
    third to three quarters busy."""
    return (
        item.get_closest_marker("leaves_cluster_down") is not None,
        item.get_closest_marker("restarts_cluster") is not None,
        item.get_closest_marker("long") is None,
        "real_operator" not in getattr(item, "fixturenames", ()),
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true nothing may skip: a skipped test there would hide a missing control plane,
    PostgreSQL or tool build behind a green run. Every skip becomes a failure with its reason.
    The call's report is kept on the item, so the namespace fixture can add what it saw after a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.call_report = report
    if IN_CI and (report.skipped or hasattr(report, "wasxfail")):  # an xfail would hide a known failure too
        report.outcome = "failed"
        report.longrepr = f"skipped or xfailed under CI=true, which must run every test: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module skipped while collecting it (a module-level skip, importorskip)."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped at collection under CI=true, which must run every test: {report.longrepr}"
