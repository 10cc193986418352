"""The operator as users install it: its chart pulled from the local registry, its image built from
the Dockerfile, two replicas on the real node with leader election, databases on real pods."""

from __future__ import annotations

import contextlib
import json
import subprocess

import pytest
import yaml

from . import sharing
from .conftest import chart_version, lease_free, wait_ready
from .realnode import NODE_NAMES, REGISTRY, images, local_node_platform
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
RELEASE = "mydb-in-cluster"


def helm(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cluster.tool("helm"), f"--kubeconfig={cluster.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def in_cluster(cluster, operator, namespace, published, tmp_path):
    """The operator chart from oci://, watching this namespace only; the shared operator stands aside unless
    the namespace is outside its scope (an own_operator test under xdist: sharing.py)."""
    # The operator runs in this namespace, not mydb-system: its pods tell the databases' NetworkPolicy so
    # themselves (desired/platform.admitting_operator), or the servers would not answer them.
    platform = local_node_platform(operator_on_host=False)
    repository, tag = images()["OPERATOR_IMAGE"].rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag},
        "replicas": 2, "leaderElection": {"enabled": True, "leaseSeconds": 10},
        "watchNamespaces": [namespace], "crds": {"install": False}, "platform": platform,
        "nodeSelector": platform["values"]["nodeSelector"], "tolerations": platform["values"]["tolerations"],
    }
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    beside = sharing.beside_the_shared_operator(namespace)
    if not beside:
        operator.stop()
    try:
        installed = helm(cluster, "upgrade", "--install", RELEASE, f"oci://{REGISTRY}/charts/mydatabase-operator",
                         "--version", chart_version("mydatabase-operator"), "--plain-http", "-n", namespace,
                         "-f", str(tmp_path / "values.yaml"), "--wait", "--timeout", "4m")
        assert installed.returncode == 0, installed.stderr + cluster.kubectl(
            "get", "events", "-n", namespace, check=False).stdout
        yield
    finally:
        helm(cluster, "uninstall", RELEASE, "-n", namespace, "--wait")
        # An operator for all namespaces (the shared one here, the serial pass's after xdist) refuses to
        # start while a Lease of this namespace is live. `--wait` sees the Deployment go, not its pods: they
        # release the Lease on SIGTERM, or it expires.
        with contextlib.suppress(AssertionError):
            wait_for("the operator pods' Lease to be free", lambda: lease_free(cluster, namespace, RELEASE),
                     timeout=60)
        if not beside:
            operator.start()


def lease_holder(cluster, namespace: str) -> str:
    return get_json(cluster, "-n", namespace, "lease", RELEASE).get("spec", {}).get("holderIdentity", "")


def proxy(cluster, namespace: str, pod: str, port: int, path: str) -> subprocess.CompletedProcess:
    """GET a pod's port through the API server (pods/proxy), as Prometheus or a user with kubectl would."""
    return cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/{path}",
                           check=False)


@pytest.mark.own_operator
@pytest.mark.long  # its set-up (an image pull, two operator pods) and call take about 45 s: handed out last, it ended the pass
def test_operator_pods_run_locked_down_and_hand_over(cluster, in_cluster, namespace):
    """Both replicas run from the built image on the real node, as a non-root uid on a read-only root
    filesystem under the chart's ServiceAccount; the leader manages a database on real pods; deleting the
    leader's pod hands over to the standby, and the database stays Ready with no new Helm revision."""
    pods = get_json(cluster, "-n", namespace, "pods", "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
    assert len(pods) == 2
    for pod in pods:
        spec, container = pod["spec"], pod["spec"]["containers"][0]
        assert spec["nodeName"] in NODE_NAMES
        assert spec["serviceAccountName"] == RELEASE
        assert container["image"] == images()["OPERATOR_IMAGE"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        name = pod["metadata"]["name"]
        uid = cluster.kubectl("exec", "-n", namespace, name, "--", "id", "-u").stdout.strip()
        assert uid != "0" and uid == "10001"
        denied = cluster.kubectl("exec", "-n", namespace, name, "--", "touch", "/app/x", check=False)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr
        # Both answer /healthz (the standby says it stands by); /metrics is the operator's own.
        assert proxy(cluster, namespace, name, 8080, "healthz").returncode == 0

    leader = wait_for("a leader", lambda: lease_holder(cluster, namespace), timeout=60)
    metrics = proxy(cluster, namespace, leader, 9090, "metrics")
    assert metrics.returncode == 0 and "mydb_" in metrics.stdout
    standby = next(p["metadata"]["name"] for p in pods if p["metadata"]["name"] != leader)
    says = f"standby: Lease {namespace}/{RELEASE} held by {leader}"
    wait_for("the standby to say whom it waits for",
             lambda: proxy(cluster, namespace, standby, 8080, "healthz").stdout.strip() == says, timeout=30)

    database = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": "kept"},
                "spec": {"replicas": 2, "version": "15.2", "storage": "1Gi"}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(database))
    wait_ready(cluster, namespace, "kept", timeout=240)
    assert get_json(cluster, "-n", namespace, "pod", "kept-0")["spec"]["nodeName"] in NODE_NAMES
    revision = get_json(cluster, "-n", namespace, "mydb", "kept")["status"]["release"]["revision"]

    cluster.kubectl("delete", "-n", namespace, "pod", leader, "--wait=false")
    # Usually the standby, which retries every 2 s; the Deployment's replacement for the deleted pod may
    # win the race under load, and that is a hand-over too. Never the deleted pod again.
    try:
        new_leader = wait_for(f"the Lease to move from {leader} to another pod",
                              lambda: (holder := lease_holder(cluster, namespace)) not in ("", leader) and holder,
                              timeout=60)
    except AssertionError as error:
        raise AssertionError(f"{error}\nLease: {get_json(cluster, '-n', namespace, 'lease', RELEASE)}\n"
                             + cluster.kubectl("get", "pods,events", "-n", namespace, check=False).stdout) from None
    # The new leader reconciles (its first pass and a resync) without touching Helm.
    wait_for("the new leader to reconcile", lambda: "mydb_reconciles_total{" in proxy(
        cluster, namespace, new_leader, 9090, "metrics").stdout, timeout=60)
    wait_ready(cluster, namespace, "kept", timeout=60)
    status = get_json(cluster, "-n", namespace, "mydb", "kept")["status"]
    assert status["release"]["revision"] == revision
    assert status["ready"] is True
