"""What a platform team's review of the bundled chart asks for, proven on the cluster: the disruption budget
under drain-like evictions, resources a ResourceQuota admits, the NetworkPolicy's selection, `helm test` on
real pods, and an upgrade of existing databases from the previous chart."""

from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest
import yaml

from .conftest import REPO, operator_instead, wait_ready
from .realnode import local_node_platform
from .test_real_postgres import (ROW_FACTS, SEED, create_db, pod_uid, rows, sql, wait_streaming, write_rows)
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
# The chart that databases ran before chart 0.2.0 (credentials as env vars, no presets, PDB or NetworkPolicy).
PREVIOUS_CHART_COMMIT = "ae38a2b"
CHART = "mydatabase-" + yaml.safe_load((REPO / "charts" / "mydatabase" / "Chart.yaml").read_text())["version"]


def kwok_db(cluster, namespace: str, name: str, replicas: int = 3) -> None:
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": name},
            "spec": {"replicas": replicas, "version": "15.2", "storage": "1Gi",
                     "backup": {"schedule": "0 2 * * *", "retention": "7d"}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def evict_at_once(cluster, namespace: str, *pods: str) -> dict[str, subprocess.CompletedProcess]:
    """POD -> the API's answer to its eviction; all sent at the same moment, as `kubectl drain` does."""
    running = {}
    for pod in pods:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        process = subprocess.Popen(
            [cluster.tool("kubectl"), f"--kubeconfig={cluster.kubeconfig}", "create", "--raw",
             f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", "-f", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running[pod] = (process, json.dumps(body))
    answers = {}
    for pod, (process, body) in running.items():
        out, err = process.communicate(body, timeout=60)
        answers[pod] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return answers


def test_drain_evicts_one_database_pod_at_a_time(cluster, real_operator, namespace):
    """Two evictions of one database's pods sent at once, as a node drain sends them: one is granted, the
    other refused by the PodDisruptionBudget. On the real node, where an evicted PostgreSQL takes its
    seconds to shut down (kwok would replace it before the second request lands). A 1-pod database has no
    budget: a drain is never blocked by it."""
    create_db(cluster, namespace, "drained", replicas=3)
    create_db(cluster, namespace, "single", replicas=1)
    wait_ready(cluster, namespace, "drained", timeout=300)
    wait_ready(cluster, namespace, "single", timeout=300)
    wait_for("the budget to allow one disruption", lambda: (get_json(
        cluster, "-n", namespace, "pdb", "drained").get("status") or {}).get("disruptionsAllowed") == 1, timeout=60)

    answers = evict_at_once(cluster, namespace, "drained-1", "drained-2")
    granted = [pod for pod, answer in answers.items() if answer.returncode == 0]
    refused = [answer.stderr for answer in answers.values() if answer.returncode != 0]
    assert len(granted) == 1 and len(refused) == 1, answers
    assert "disruption budget" in refused[0], refused
    assert get_json(cluster, "-n", namespace, "pdb", "single") == {}
    assert evict_at_once(cluster, namespace, "single-0")["single-0"].returncode == 0


def test_resource_quota_admits_the_database_and_backup_pods(cluster, operator, namespace):
    """A namespace whose ResourceQuota counts CPU and memory requests and limits: every pod must declare all
    four, or the API server refuses it. The database's pods and a backup Job's pod are admitted."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
             "spec": {"hard": {"requests.cpu": "2", "requests.memory": "4Gi",
                               "limits.cpu": "8", "limits.memory": "8Gi"}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(quota))
    # Admission refuses every pod until the quota controller has computed the quota's status.
    wait_for("the quota's status", lambda: (get_json(cluster, "-n", namespace, "resourcequota", "compute")
                                            .get("status") or {}).get("hard"), timeout=60)
    kwok_db(cluster, namespace, "quoted", replicas=3)
    wait_ready(cluster, namespace, "quoted")
    cluster.kubectl("create", "job", "-n", namespace, "quoted-manual", "--from=cronjob/quoted-backup")
    wait_for("the backup Job's pod", lambda: get_json(
        cluster, "-n", namespace, "pods", "-l", "job-name=quoted-manual")["items"], timeout=60)
    # Every pod counted (the archive's and the first backup's come and go with their own timing): the quota's
    # CPU requests are the sum over the pods that have not ended, three of them the database's 105m each (the
    # server's 100m and its probe container's 5m).
    def counted() -> bool:
        used = get_json(cluster, "-n", namespace, "resourcequota", "compute")["status"]["used"]["requests.cpu"]
        live = [pod for pod in get_json(cluster, "-n", namespace, "pods")["items"]
                if pod["status"].get("phase") not in ("Succeeded", "Failed")]
        return millicores_of(used) == sum(millicores(pod) for pod in live)
    labelled = get_json(cluster, "-n", namespace, "pods", "-l", "app.kubernetes.io/instance=quoted")["items"]
    database = [p for p in labelled if millicores(p) == 105]
    assert len(database) >= 3, [p["metadata"]["name"] for p in database]
    wait_for("the quota to count every live pod", counted, timeout=30)
    events = cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    assert "exceeded quota" not in events and "must specify" not in events


def millicores_of(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def millicores(pod: dict) -> int:
    """The pod's CPU request as a ResourceQuota counts it, the pod's effective request: its containers with its
    sidecars (init containers that keep running), or an init container with the sidecars started
    before it, whichever is more."""
    def cpu(container: dict) -> int:
        return millicores_of(container.get("resources", {}).get("requests", {}).get("cpu", "0"))

    sidecars = peak = 0
    for init in pod["spec"].get("initContainers", []):
        if init.get("restartPolicy") == "Always":
            sidecars += cpu(init)
        else:
            peak = max(peak, sidecars + cpu(init))
    return max(peak, sidecars + sum(cpu(c) for c in pod["spec"]["containers"]))


def test_network_policy_selects_the_database_and_admits_its_own_pods(cluster, operator, namespace):
    """The installed policy's selectors against the live pods (kwok's: the real node's enforcement is
    tests/e2e/test_tls.py's): it applies to exactly the database's pods and its backup Job's pod (which has no
    PostgreSQL port, so nothing gets in), its own-pods peer admits them but not the pods of another database
    in the namespace, and the other peers are the labelled clients and the operator, not the namespace."""
    kwok_db(cluster, namespace, "guarded", replicas=2)
    kwok_db(cluster, namespace, "neighbour", replicas=1)
    wait_ready(cluster, namespace, "guarded")
    wait_ready(cluster, namespace, "neighbour")
    cluster.kubectl("create", "job", "-n", namespace, "guarded-manual", "--from=cronjob/guarded-backup")
    wait_for("the backup Job's pod", lambda: get_json(
        cluster, "-n", namespace, "pods", "-l", "job-name=guarded-manual")["items"], timeout=60)
    [policy] = [item["spec"] for item in get_json(cluster, "-n", namespace, "networkpolicy")["items"]
                if item["metadata"]["name"].startswith("guarded")]

    def selected(match_labels: dict) -> dict[str, dict]:
        selector = ",".join(f"{k}={v}" for k, v in match_labels.items())
        items = get_json(cluster, "-n", namespace, "pods", "-l", selector)["items"]
        return {p["metadata"]["name"]: p for p in items}

    governed = selected(policy["podSelector"]["matchLabels"])
    # The manual Job's pod, and the first base backup's (the operator's own Job).
    backup_pods = [name for name in governed if name.startswith(("guarded-manual-", "guarded-backup-"))]
    # The archive's pod too: it has no PostgreSQL port either, and reaches the primary as a peer.
    assert set(governed) == {"guarded-0", "guarded-1", "guarded-wal-0", *backup_pods} and backup_pods, sorted(governed)
    # The second rule: the database's own pods to the probe port (the primary lease's peers, lease.pl).
    [rule, peers] = policy["ingress"]
    assert peers["ports"] == [{"port": "probe", "protocol": "TCP"}] and peers["from"] == [rule["from"][0]]
    [port] = rule["ports"]
    for name, pod in governed.items():
        named = {p.get("name") for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert (port["port"] in named) == (name in ("guarded-0", "guarded-1")), (name, named)
    own, *others = rule["from"]
    admitted = selected(own["podSelector"]["matchLabels"])
    assert set(governed) <= set(admitted)
    assert not any(name.startswith("neighbour") for name in admitted), sorted(admitted)
    operator = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mydb-system"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mydatabase-operator"}}}
    assert others == [{"podSelector": {"matchLabels": {"guarded-client": "true"}}}, operator]


def helm(cluster, *args: str) -> subprocess.CompletedProcess:
    """The helm CLI as admin, reading the releases the operator keeps (HELM_DRIVER=configmap)."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HELM_DRIVER": "configmap"}
    return subprocess.run([cluster.tool("helm"), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.long
def test_a_restricted_namespace_runs_a_real_node_database_its_backups_and_its_tests(cluster, real_operator,
                                                                                     namespace):
    """In a namespace whose Pod Security admission enforces `restricted`, every pod of a real-node database
    with continuous backup is admitted and runs: the servers, the archive, its first base backup, an
    on-demand dump, and `helm test`'s pod, which writes and reads a row through the read-write Service as the
    application's role (its Secret, made by the operator) and reads it back from a replica through the
    read-only one."""
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
                    "pod-security.kubernetes.io/enforce-version=latest")
    control = cluster.kubectl("run", "not-restricted", "--image=example.invalid/x", "-n", namespace, check=False)
    assert control.returncode != 0 and 'violates PodSecurity "restricted' in control.stderr, control.stderr
    name = "tested"
    create_db(cluster, namespace, name, replicas=2, backup={**SEED["spec"]["backup"], "continuous": True})
    wait_ready(cluster, namespace, name, timeout=300)
    wait_streaming(cluster, namespace, f"{name}-0", 1)
    result = helm(cluster, "test", name, "-n", namespace, "--logs", "--timeout", "180s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote and read a row through {name} (the primary)" in result.stdout, result.stdout
    assert f"read the row back through {name}-ro (a replica)" in result.stdout, result.stdout
    node = get_json(cluster, "-n", namespace, "pod", f"{name}-test")["spec"]["nodeName"]
    assert not node.startswith("kwok-"), node

    def backup() -> dict:
        return (get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}).get("backup") or {}
    wait_for("the first base backup", lambda: backup().get("firstBackupJob")
             and backup().get("lastSuccessfulJob") == backup().get("firstBackupJob"), timeout=180)
    cluster.kubectl("annotate", "-n", namespace, f"mydb/{name}", "myapp.example.com/backup-now=restricted")
    dump = wait_for("the on-demand backup's Job", lambda: backup().get("lastOnDemandJob"), timeout=60)
    wait_for("the on-demand backup to succeed", lambda: backup().get("lastSuccessfulJob") == dump, timeout=180)
    refused = [e["message"] for e in get_json(cluster, "-n", namespace, "events")["items"]
               if "violates PodSecurity" in e.get("message", "")]
    assert not refused, refused


def secret_data(cluster, namespace: str, secret: str) -> dict[str, str]:
    data = get_json(cluster, "-n", namespace, "secret", secret)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def previous_chart(tmp_path) -> str:
    """charts/mydatabase as of PREVIOUS_CHART_COMMIT, from this repository's history."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS_CHART_COMMIT, "charts/mydatabase"],
                             capture_output=True, timeout=60)
    assert archive.returncode == 0, f"the previous chart is not in this clone's history: {archive.stderr!r}"
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    return str(tmp_path / "charts" / "mydatabase")


@pytest.mark.own_operator
@pytest.mark.long
def test_databases_upgrade_from_the_previous_chart_in_one_roll(cluster, operator, namespace, tmp_path):
    """A real-node database made by the previous chart (plain TCP), then the operator upgraded to this one,
    which turns TLS on: the pods are replaced once each (one new StatefulSet revision), the primary first and
    in place (a replica restarted first would insist on TLS to a primary that has none), then the replica,
    every row kept, the replica streaming over TLS with verify-full, and no password left in its connection
    settings."""
    # The previous chart has no NetworkPolicy and refuses its value; this one admits the operator (on the host)
    # by address.
    platform = tmp_path / "platform.yaml"
    previous_platform = local_node_platform()
    del previous_platform["values"]["networkPolicy"]
    platform.write_text(json.dumps(previous_platform))
    name = "upgraded"
    # One operator for the namespace throughout, restarted on the new chart: the shared one (no platform
    # config) must not reconcile the database in between.
    with operator_instead(operator, namespace, "operator-upgrade.log",
                          MYDB_PLATFORM_CONFIG=str(platform), MYDB_CHART_DIR=previous_chart(tmp_path)) as own:
        create_db(cluster, namespace, name, replicas=2)
        wait_ready(cluster, namespace, name, timeout=300)
        wait_streaming(cluster, namespace, f"{name}-0", 1)
        write_rows(cluster, namespace, f"{name}-0")
        chart = get_json(cluster, "-n", namespace, "mydb", name)["status"]["release"]["chart"]
        assert chart == "mydatabase-0.1.0", chart
        pods = [f"{name}-0", f"{name}-1"]
        uids = {pod: pod_uid(cluster, namespace, pod) for pod in pods}
        revisions_before = len(get_json(cluster, "-n", namespace, "controllerrevisions")["items"])

        own.stop()
        # As an operator before TLS (0.9.0) left it: plain URIs and no CA in the Secret, nothing in status.tls.
        credentials = secret_data(cluster, namespace, f"{name}-credentials")
        plain = {key: credentials[key].replace("?sslmode=verify-full", "") for key in ("uri", "uri-ro")}
        cluster.kubectl("-n", namespace, "patch", "secret", f"{name}-credentials", "--type=merge", "-p", json.dumps(
            {"data": {"ca.crt": None, **{k: base64.b64encode(v.encode()).decode() for k, v in plain.items()}}}))
        cluster.kubectl("-n", namespace, "patch", "mydb", name, "--subresource=status", "--type=json",
                        "-p", '[{"op": "remove", "path": "/status/tls"}]')
        del own.env["MYDB_CHART_DIR"]
        platform.write_text(json.dumps(local_node_platform()))
        own.start()
        replaced: list[str] = []

        def all_replaced() -> bool:
            for pod in pods:
                if pod not in replaced and pod_uid(cluster, namespace, pod) not in ("", uids[pod]):
                    replaced.append(pod)
            return len(replaced) == len(pods)
        wait_for("every pod replaced", all_replaced, timeout=600, interval=0.5)
        assert replaced == [f"{name}-0", f"{name}-1"], replaced
        wait_for(f"the release on chart {CHART}", lambda: (get_json(cluster, "-n", namespace, "mydb", name)
                 .get("status") or {}).get("release", {}).get("chart") == CHART, timeout=120)
        wait_ready(cluster, namespace, name, timeout=300)
        status = get_json(cluster, "-n", namespace, "mydb", name)["status"]
        assert status["primary"] == f"{name}-0" and "lastSwitchover" not in status, status
        assert status["tls"]["issuer"] == "operator", status
        wait_streaming(cluster, namespace, f"{name}-0", 1)
        for pod in pods:
            assert rows(cluster, namespace, pod) == ROW_FACTS
        assert len(get_json(cluster, "-n", namespace, "controllerrevisions")["items"]) == revisions_before + 1
        conninfo = sql(cluster, namespace, f"{name}-1", "show primary_conninfo")
        assert "passfile=" in conninfo and "password=" not in conninfo, conninfo
        assert "sslmode=verify-full" in conninfo, conninfo
        encrypted = "select ssl from pg_stat_replication join pg_stat_ssl using (pid)"
        assert sql(cluster, namespace, f"{name}-0", encrypted) == "t"
        assert get_json(cluster, "-n", namespace, "pdb", name) != {}
        assert get_json(cluster, "-n", namespace, "networkpolicy", name) != {}
        # The credentials Secret now carries the CA, so a client can verify the servers; its URIs (a client may
        # read them without the CA yet) and password are as they were.
        upgraded = secret_data(cluster, namespace, f"{name}-credentials")
        assert upgraded["ca.crt"] == secret_data(cluster, namespace, f"{name}-tls")["ca.crt"]
        assert (upgraded["uri"], upgraded["uri-ro"], upgraded["password"]) == (
            plain["uri"], plain["uri-ro"], credentials["password"])
        # The upgrade put the MyDatabase's ownerReference on the old release's objects too.
        owner = get_json(cluster, "-n", namespace, "mydb", name)["metadata"]["uid"]
        refs = get_json(cluster, "-n", namespace, "statefulset", name)["metadata"].get("ownerReferences") or []
        assert [ref["uid"] for ref in refs] == [owner], refs
