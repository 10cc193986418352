"""The local control plane behaves like a real cluster where the operator needs it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .sharing import create_namespace
from .waiting import get_json, wait_for

REPO = Path(__file__).resolve().parents[2]
# The module's CronJob ticks while its other tests run: one worker runs them all (tests/conftest.py).
pytestmark = pytest.mark.e2e


def versions() -> dict[str, str]:
    lines = (REPO / "hack" / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def apply(cluster, namespace: str, manifest: dict) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest))


@pytest.fixture(scope="module", autouse=True)
def ticking(cluster):
    """An every-minute CronJob made as the module starts, in a namespace of its own: by the module's last test,
    which looks at it, the minute has come round while the other tests ran (waiting for it alone took 30 s)."""
    namespace = create_namespace(cluster, "cluster-cron-tick")
    apply(cluster, namespace, {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}},
    })
    yield namespace
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_server_reports_pinned_version(cluster):
    """kubectl (and so Helm) sees the pinned Kubernetes version, not v0.0.0."""
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == versions()["KUBERNETES_VERSION"]
    assert out["clientVersion"]["gitVersion"] == versions()["KUBERNETES_VERSION"]
    major, minor = int(out["serverVersion"]["major"]), int(out["serverVersion"]["minor"])
    assert (major, minor) >= (1, 35)


def test_statefulset_pods_ready_claims_bound_and_expand(cluster, namespace):
    """3 pods become Ready and 3 claims Bound; a grown claim reaches its new capacity."""
    labels = {"app": "web"}
    apply(cluster, namespace, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {
            "replicas": 3, "serviceName": "web", "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    })
    wait_for("3 ready replicas", lambda: get_json(cluster, "-n", namespace, "statefulset", "web")
             .get("status", {}).get("readyReplicas") == 3, timeout=90)
    claims = get_json(cluster, "-n", namespace, "pvc")["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-web-0", "data-web-1", "data-web-2"]
    assert all(c["status"]["phase"] == "Bound" for c in claims)
    assert all(c["spec"]["storageClassName"] == "standard" for c in claims)

    cluster.kubectl("patch", "-n", namespace, "pvc", "data-web-1", "--type=merge",
                    "-p", '{"spec":{"resources":{"requests":{"storage":"5Gi"}}}}')
    wait_for("claim capacity 5Gi", lambda: get_json(cluster, "-n", namespace, "pvc", "data-web-1")
             ["status"].get("capacity", {}).get("storage") == "5Gi", timeout=60)
    volume = get_json(cluster, "-n", namespace, "pvc", "data-web-1")["spec"]["volumeName"]
    assert get_json(cluster, "pv", volume)["spec"]["capacity"]["storage"] == "5Gi"


def test_default_class_claim_gets_a_real_folder_that_reclaim_removes(cluster, namespace):
    """A claim of the default class gets a hostPath PV whose folder exists on this machine, mode 0777
    (PostgreSQL runs as uid 999 and hostPath volumes get no fsGroup); deleting the claim deletes the
    PV and then the folder with its data (reclaim policy Delete)."""
    apply(cluster, namespace, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    })
    wait_for("claim bound", lambda: get_json(cluster, "-n", namespace, "pvc", "data")
             .get("status", {}).get("phase") == "Bound")
    claim = get_json(cluster, "-n", namespace, "pvc", "data")
    assert claim["spec"]["storageClassName"] == "standard"
    name = claim["spec"]["volumeName"]
    volume = get_json(cluster, "pv", name)
    source = volume["spec"].get("hostPath")
    assert source and source.get("type") == "Directory", volume["spec"]
    folder = Path(source["path"])
    volume_dir = cluster.kubeconfig.parent / "state" / "volumes"
    assert folder.is_absolute() and folder.parent.resolve() == volume_dir.resolve(), folder
    assert folder.name == name == f"pvc-{claim['metadata']['uid']}"

    wait_for(f"folder {folder}", folder.is_dir, timeout=30)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777
    (folder / "PG_VERSION").write_text("15\n")  # data, as a database would leave it

    cluster.kubectl("delete", "-n", namespace, "pvc", "data", "--wait=false")
    wait_for(f"PV {name} deleted", lambda: not get_json(cluster, "pv", name), timeout=60)
    wait_for(f"folder {folder} removed", lambda: not folder.exists(), timeout=30)


def test_claim_in_class_without_expansion_cannot_grow(cluster, namespace):
    """The API server refuses growth where the StorageClass does not allow expansion."""
    apply(cluster, namespace, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fixed"},
        "spec": {"storageClassName": "fixed-size", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}},
    })
    wait_for("claim bound", lambda: get_json(cluster, "-n", namespace, "pvc", "fixed")
             .get("status", {}).get("phase") == "Bound")
    result = cluster.kubectl("patch", "-n", namespace, "pvc", "fixed", "--type=merge",
                             "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}', check=False)
    assert result.returncode != 0
    assert "only dynamically provisioned pvc can be resized" in result.stderr


def test_failure_label_fails_pod_and_job(cluster, namespace):
    """The kwok failure Stage ends a labelled pod Failed and its Job failed."""
    fail = {"kwok.mydb.local/fail": "true"}
    apply(cluster, namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "doomed", "labels": fail},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    })
    apply(cluster, namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "doomed-job"},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": fail}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    })
    wait_for("pod Failed", lambda: get_json(cluster, "-n", namespace, "pod", "doomed")
             .get("status", {}).get("phase") == "Failed")

    def job_failed():
        conditions = get_json(cluster, "-n", namespace, "job", "doomed-job").get("status", {}).get("conditions", [])
        return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
    wait_for("Job Failed condition", job_failed, timeout=90)


def test_rbac_is_enforced_for_service_accounts(cluster, namespace, tmp_path):
    """A ServiceAccount token is denied until a Role grants it (RBAC is really on)."""
    cluster.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    kubeconfig = tmp_path / "reader.kubeconfig"
    subprocess.run([sys.executable, str(REPO / "hack" / "cluster.py"), "sa-kubeconfig", "-n", namespace,
                    "-s", "reader", "-o", str(kubeconfig)], check=True,
                   env={**os.environ, "MYDB_CLUSTER_DIR": str(cluster.kubeconfig.parent)})
    denied = cluster.kubectl("get", "pods", "-n", namespace, kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0 and "Forbidden" in denied.stderr

    cluster.kubectl("create", "role", "pod-reader", "-n", namespace, "--verb=get,list", "--resource=pods")
    cluster.kubectl("create", "rolebinding", "pod-reader", "-n", namespace, "--role=pod-reader",
                    f"--serviceaccount={namespace}:reader")
    wait_for("access granted", lambda: cluster.kubectl(
        "get", "pods", "-n", namespace, kubeconfig=kubeconfig, check=False).returncode == 0, timeout=30)


def test_deleting_statefulset_garbage_collects_pods(cluster, namespace):
    """The garbage collector (controller-manager) removes a deleted StatefulSet's pods."""
    labels = {"app": "gc"}
    apply(cluster, namespace, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "gc"},
        "spec": {"replicas": 2, "serviceName": "gc", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    })
    wait_for("2 pods", lambda: len(get_json(cluster, "-n", namespace, "pods", "-l", "app=gc")["items"]) == 2)
    cluster.kubectl("delete", "-n", namespace, "statefulset", "gc", "--wait=false")
    wait_for("pods collected", lambda: not get_json(cluster, "-n", namespace, "pods", "-l", "app=gc")["items"],
             timeout=60)


def test_cluster_down_leaves_no_process(cluster):
    """A second cluster on other ports and folder starts, and `down` stops every process of it."""
    with tempfile.TemporaryDirectory(prefix="mydb-second-cluster-") as folder:
        env = {**os.environ, "MYDB_CLUSTER_DIR": folder, "MYDB_CLUSTER_PORT_BASE": "17400", "MYDB_REAL_NODE": "0"}
        cluster_py = [sys.executable, str(REPO / "hack" / "cluster.py")]
        try:
            subprocess.run([*cluster_py, "up"], env=env, check=True, capture_output=True, timeout=300)
            pids = [int(p.read_text()) for p in Path(folder, "state", "pids").glob("*.pid")]
            assert len(pids) == 6  # the control plane, kwok and the volume agent
            assert all(Path(f"/proc/{pid}").exists() for pid in pids)
        finally:
            subprocess.run([*cluster_py, "down"], env=env, check=True, capture_output=True, timeout=120)
        survivors = [pid for pid in pids if Path(f"/proc/{pid}/cmdline").exists()
                     and Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert survivors == []
        assert not Path(folder, "state").exists()
        assert Path(folder, "logs", "kube-apiserver.log").exists()


def test_a_thousand_claims_bind_and_grow(cluster, namespace):
    """The simulated storage driver keeps up with 1000 claims: all bind, and grown ones reach their size."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    # Created one request each, as a controller would (`kubectl apply` read the namespace and the claim first).
    for i in range(1000):
        core.create_namespaced_persistent_volume_claim(namespace, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"c{i}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
            _preload_content=False)

    # Polled as plain JSON: the client's models cost about a second of CPU per list of 1000.
    def listed() -> list[dict]:
        return get_json(cluster, "-n", namespace, "persistentvolumeclaims")["items"]

    def phases() -> list[str]:
        return [c.get("status", {}).get("phase") for c in listed()]
    wait_for("1000 claims Bound", lambda: phases().count("Bound") == 1000, timeout=180, interval=2)

    grown = [f"c{i}" for i in range(0, 1000, 20)]
    for name in grown:
        core.patch_namespaced_persistent_volume_claim(name, namespace, {"spec": {"resources": {"requests": {
            "storage": "2Gi"}}}})

    def at_2gi() -> int:
        sizes = {c["metadata"]["name"]: c.get("status", {}).get("capacity", {}).get("storage") for c in listed()}
        return sum(1 for name in grown if sizes.get(name) == "2Gi")
    wait_for(f"{len(grown)} grown claims at 2Gi", lambda: at_2gi() == len(grown), timeout=120, interval=2)


def test_cronjob_runs_a_job_to_success(cluster, ticking):
    """The CronJob controller really runs: the every-minute CronJob yields a Succeeded pod."""
    def succeeded_pod():
        pods = get_json(cluster, "-n", ticking, "pods")["items"]
        return [p["metadata"]["name"] for p in pods if p.get("status", {}).get("phase") == "Succeeded"]
    wait_for("a Succeeded job pod", succeeded_pod, timeout=150, interval=2)
