"""The operator end to end on the local control plane, running under its own ServiceAccount."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import wait_ready
from .waiting import get_json, printed, wait_for

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "production-db.yaml"  # the seed CR, byte for byte
pytestmark = pytest.mark.e2e


def apply_db(cluster, namespace: str, name: str, spec: dict) -> None:
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": name}, "spec": spec}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def helm(cluster, *args: str) -> str:
    return subprocess.run([cluster.tool("helm"), f"--kubeconfig={cluster.kubeconfig}", *args],
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "HELM_DRIVER": "configmap"}).stdout


def revision(cluster, namespace: str, name: str) -> int:
    history = json.loads(helm(cluster, "history", name, "-n", namespace, "-o", "json"))
    return max(entry["revision"] for entry in history)


def endpoint_pods(cluster, namespace: str, service: str) -> list[str]:
    slices = get_json(cluster, "-n", namespace, "endpointslices", "-l", f"kubernetes.io/service-name={service}")
    return sorted(e["targetRef"]["name"] for s in slices.get("items", []) for e in s.get("endpoints") or []
                  if (e.get("conditions") or {}).get("ready"))


def test_seed_becomes_ready_with_services_by_role(cluster, operator, namespace):
    """The seed CR, verbatim, reaches Ready with 3 ready replicas; rw/ro Services split by role."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(SEED))
    wait_ready(cluster, namespace, "production-db")
    db = get_json(cluster, "-n", namespace, "mydb", "production-db")
    assert db["status"]["readyReplicas"] == 3
    assert db["status"]["phase"] == "Running"
    assert db["status"]["observedGeneration"] == db["metadata"]["generation"]
    assert db["status"]["release"]["revision"] >= 1
    assert db["status"]["primary"] == "production-db-0"

    # VERSION is what the primary's server says it runs: kwok's pods run none (test_real_postgres.py shows one).
    columns = printed(cluster, namespace, "mydb", "production-db")
    assert list(columns) == ["NAME", "REPLICAS", "READY", "VERSION", "PHASE", "AGE"]
    assert [columns[c] for c in ("NAME", "REPLICAS", "READY", "VERSION", "PHASE")] == [
        "production-db", "3", "3", "", "Running"]

    wait_for("rw endpoints = primary", lambda: endpoint_pods(cluster, namespace, "production-db")
             == ["production-db-0"])
    wait_for("ro endpoints = replicas", lambda: endpoint_pods(cluster, namespace, "production-db-ro")
             == ["production-db-1", "production-db-2"])
    pvcs = get_json(cluster, "-n", namespace, "pvc")["items"]
    data = [p for p in pvcs if p["metadata"]["name"].startswith("data-production-db-")]
    assert len(data) == 3 and all(p["spec"]["resources"]["requests"]["storage"] == "100Gi" for p in data)

    # The operator's own writes are signed with its name: status, and the role label on a pod.
    db = get_json(cluster, "-n", namespace, "mydb", "production-db", "--show-managed-fields")
    assert {m["manager"] for m in db["metadata"]["managedFields"] if m.get("subresource") == "status"} == {
        "mydb-operator"}
    pod = get_json(cluster, "-n", namespace, "pod", "production-db-0", "--show-managed-fields")
    assert "mydb-operator" in {m["manager"] for m in pod["metadata"]["managedFields"]}


def test_password_stays_in_its_secret(cluster, operator, namespace):
    """The generated password is in the Secret only: not in status, events or the Helm release."""
    apply_db(cluster, namespace, "quiet", {"replicas": 1, "version": "16.1", "storage": "1Gi"})
    wait_ready(cluster, namespace, "quiet")
    secret = get_json(cluster, "-n", namespace, "secret", "quiet-credentials")
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert len(password) >= 24
    everything = "\n".join([
        json.dumps(get_json(cluster, "-n", namespace, "mydb", "quiet")),
        json.dumps(get_json(cluster, "-n", namespace, "events")),
        helm(cluster, "get", "all", "quiet", "-n", namespace),
        operator.log_path.read_text(),
    ])
    assert password not in everything


def test_scaling_by_kubectl_scale_and_by_spec(cluster, operator, namespace):
    """kubectl scale and a spec edit both reach the StatefulSet and the status."""
    apply_db(cluster, namespace, "scaly", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "scaly")
    cluster.kubectl("scale", "-n", namespace, "mydb/scaly", "--replicas=3")
    wait_for("StatefulSet at 3", lambda: get_json(cluster, "-n", namespace, "sts", "scaly")["spec"]["replicas"] == 3)
    wait_for("status readyReplicas 3", lambda: get_json(cluster, "-n", namespace, "mydb", "scaly")
             ["status"].get("readyReplicas") == 3)
    wait_ready(cluster, namespace, "scaly")
    cluster.kubectl("patch", "-n", namespace, "mydb/scaly", "--type=merge", "-p", '{"spec":{"replicas":2}}')
    wait_for("StatefulSet at 2", lambda: get_json(cluster, "-n", namespace, "sts", "scaly")["spec"]["replicas"] == 2)
    wait_for("status at 2 and Ready", lambda: (lambda s: s.get("readyReplicas") == 2 and s.get("ready"))(
        get_json(cluster, "-n", namespace, "mydb", "scaly")["status"]))


def test_backup_schedule_change_and_removal(cluster, operator, namespace):
    """Editing backup.schedule updates the CronJob; removing backup removes it."""
    apply_db(cluster, namespace, "bk", {"replicas": 1, "version": "15.2", "storage": "1Gi",
                                        "backup": {"schedule": "0 2 * * *"}})
    wait_for("CronJob", lambda: get_json(cluster, "-n", namespace, "cronjob", "bk-backup")
             .get("spec", {}).get("schedule") == "0 2 * * *")
    cluster.kubectl("patch", "-n", namespace, "mydb/bk", "--type=merge", "-p",
                    '{"spec":{"backup":{"schedule":"30 4 * * 0"}}}')
    wait_for("new schedule", lambda: get_json(cluster, "-n", namespace, "cronjob", "bk-backup")
             .get("spec", {}).get("schedule") == "30 4 * * 0")
    cluster.kubectl("patch", "-n", namespace, "mydb/bk", "--type=json", "-p", '[{"op":"remove","path":"/spec/backup"}]')
    wait_for("CronJob removed", lambda: get_json(cluster, "-n", namespace, "cronjob", "bk-backup") == {})


def test_restart_with_unchanged_crs_runs_no_helm(cluster, operator, namespace):
    """After a restart the operator finds every release up to date: the revision does not move."""
    apply_db(cluster, namespace, "steady", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "steady")
    before = revision(cluster, namespace, "steady")
    operator.restart()
    wait_for("the new operator to reconcile steady",
             lambda: f"{namespace}/steady: up to date at helm revision {before}" in operator.log_since_start(),
             timeout=60)
    assert revision(cluster, namespace, "steady") == before
    wait_ready(cluster, namespace, "steady")


def test_deleted_children_are_put_back(cluster, operator, namespace):
    """A StatefulSet or Service deleted by hand comes back although the spec hash did not change."""
    apply_db(cluster, namespace, "drifty", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "drifty")
    cluster.kubectl("delete", "-n", namespace, "service", "drifty-ro")
    wait_for("Service back", lambda: get_json(cluster, "-n", namespace, "service", "drifty-ro") != {})
    cluster.kubectl("delete", "-n", namespace, "statefulset", "drifty", "--cascade=orphan")
    wait_for("StatefulSet back", lambda: get_json(cluster, "-n", namespace, "statefulset", "drifty") != {})
    wait_ready(cluster, namespace, "drifty")


def release_objects(cluster, namespace: str, name: str) -> list[str]:
    """What is left of a release's objects besides its claims, as kind/name."""
    listed = get_json(cluster, "-n", namespace, "statefulsets,services,configmaps,cronjobs,pdb,networkpolicies",
                      "-l", f"app.kubernetes.io/instance={name}")
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in listed["items"])


def test_delete_retain_keeps_claims_and_secret(cluster, operator, namespace):
    """Default deletionPolicy Retain: the release goes, the PVCs and the credentials stay. The objects are the
    MyDatabase's own, so no Helm runs: the records go in one request, the garbage collector takes the rest."""
    apply_db(cluster, namespace, "keep", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                          "backup": {"schedule": "@daily"}})
    wait_ready(cluster, namespace, "keep")
    assert release_objects(cluster, namespace, "keep") == [
        "ConfigMap/keep-scripts", "CronJob/keep-backup", "NetworkPolicy/keep", "PodDisruptionBudget/keep",
        "Service/keep", "Service/keep-headless", "Service/keep-ro", "StatefulSet/keep", "StatefulSet/keep-wal"]
    cluster.kubectl("delete", "-n", namespace, "mydb/keep", "--timeout=60s")
    assert "keep" not in helm(cluster, "list", "-n", namespace, "-q").split()
    wait_for("the garbage collector to remove the release's objects",
             lambda: not release_objects(cluster, namespace, "keep"), timeout=60)
    claims = [c["metadata"]["name"] for c in get_json(cluster, "-n", namespace, "pvc")["items"]]
    assert sorted(claims) == ["data-keep-0", "data-keep-1", "keep-backups"]
    assert get_json(cluster, "-n", namespace, "secret", "keep-credentials") != {}
    assert f"{namespace}/keep: deleted, its objects go with it (garbage collector)" in operator.log_since_start()


def test_a_release_from_before_owner_references_is_uninstalled(cluster, operator, namespace):
    """A release whose StatefulSet the MyDatabase does not own (made by chart 0.3.0 or older, or by a
    platform chart without the owner) is removed by helm uninstall: nothing is left behind either way."""
    apply_db(cluster, namespace, "older", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "older")
    cluster.kubectl("patch", "-n", namespace, "statefulset", "older", "--type=json",
                    "-p", '[{"op": "remove", "path": "/metadata/ownerReferences"}]')
    cluster.kubectl("delete", "-n", namespace, "mydb/older", "--timeout=60s")
    assert "older" not in helm(cluster, "list", "-n", namespace, "-q").split()
    assert release_objects(cluster, namespace, "older") == []  # helm uninstall deleted them before returning
    assert f"{namespace}/older: deleted, its release uninstalled" in operator.log_since_start()


def test_delete_policy_delete_removes_claims_and_secret(cluster, operator, namespace):
    """deletionPolicy Delete: the release, the PVCs and the credentials Secret all go."""
    apply_db(cluster, namespace, "gone", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                          "deletionPolicy": "Delete", "backup": {"schedule": "@daily"}})
    wait_ready(cluster, namespace, "gone")
    cluster.kubectl("delete", "-n", namespace, "mydb/gone", "--timeout=60s")
    wait_for("claims deleted", lambda: not get_json(cluster, "-n", namespace, "pvc")["items"])
    assert get_json(cluster, "-n", namespace, "secret", "gone-credentials") == {}
    assert "gone" not in helm(cluster, "list", "-n", namespace, "-q").split()


def test_delete_policy_delete_while_the_database_lingers_leaves_no_claim(cluster, operator, namespace):
    """deletionPolicy Delete on a MyDatabase that another finalizer keeps a while: the garbage collector would
    leave the StatefulSet running until the MyDatabase is gone, its pods holding the deleted claims (and any
    pod it re-creates bringing its claim back). The operator deletes the StatefulSet first, so the pods and
    then the claims go while the MyDatabase still lingers."""
    apply_db(cluster, namespace, "held", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                          "deletionPolicy": "Delete"})
    wait_ready(cluster, namespace, "held")
    cluster.kubectl("patch", "-n", namespace, "mydb/held", "--type=json",
                    "-p", '[{"op": "add", "path": "/metadata/finalizers/-", "value": "test.example.com/hold"}]')
    try:
        cluster.kubectl("delete", "-n", namespace, "mydb/held", "--wait=false")
        wait_for("the operator's deletion", lambda: f"{namespace}/held: deleted" in operator.log_since_start(),
                 timeout=60)
        assert get_json(cluster, "-n", namespace, "mydb", "held") != {}  # still held by the test's finalizer
        wait_for("the StatefulSet deleted", lambda: get_json(cluster, "-n", namespace, "statefulset", "held") == {},
                 timeout=30)
        wait_for("the claims deleted", lambda: not get_json(cluster, "-n", namespace, "pvc")["items"], timeout=90)
        assert get_json(cluster, "-n", namespace, "secret", "held-credentials") == {}
    finally:
        cluster.kubectl("patch", "-n", namespace, "mydb/held", "--type=merge", "-p", '{"metadata": {"finalizers": null}}')


def test_a_deleted_namespace_goes_with_its_database(cluster, operator, namespace):
    """Deleting a namespace deletes its database with it, whatever the operator's scope. Scoped by a pattern
    (`gw0-*`, as each xdist worker's operator is), kopf stops watching a namespace being deleted and never ran
    the deletion: the namespace stayed Terminating for ever, held by the finalizer, until the daemon learnt to
    let such a database go (reconcile/namespace_deletion.py)."""
    apply_db(cluster, namespace, "tenant", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "tenant")
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    wait_for("the namespace gone", lambda: get_json(cluster, "namespace", namespace) == {}, timeout=90)
    # Whoever came first let it go: kopf's deletion handler, when its watch saw the deletion before it stopped
    # watching the namespace, else the daemon.
    told = operator.log_since_start()
    assert f"{namespace}/tenant: deleted" in told or f"{namespace}/tenant: the namespace is being deleted" in told
    # The namespace controller deletes the StatefulSet and Services before the database: no Helm run puts them
    # back (it would be refused, with a HelmFailed Warning no one could read).
    assert f"{namespace}/tenant: putting back" not in told and f"{namespace}/tenant: HelmFailed" not in told


def test_render_equals_what_the_operator_applied(cluster, operator, namespace):
    """`mydb-operator render` prints exactly the release's manifest: 3 replicas, 100Gi, Services, CronJob."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(SEED))
    wait_for("release", lambda: get_json(cluster, "-n", namespace, "mydb", "production-db")
             .get("status", {}).get("release"))
    rendered = subprocess.run(
        [sys.executable, "-m", "mydb_operator.cli", "--helm", cluster.tool("helm"), "render", "-f", str(SEED),
         "--namespace", namespace], check=True, capture_output=True, text=True,
    ).stdout
    rendered_docs = [d for d in yaml.safe_load_all(rendered) if d]
    applied_docs = [d for d in yaml.safe_load_all(helm(cluster, "get", "manifest", "production-db", "-n", namespace)) if d]
    # The one difference: the operator's release is owned by the live MyDatabase (its uid), a CR file is not.
    owner = get_json(cluster, "-n", namespace, "mydb", "production-db")["metadata"]["uid"]
    assert {(d["kind"], d["metadata"].pop("ownerReferences", [{}])[0].get("uid")) for d in applied_docs} == {
        (d["kind"], None if d["kind"] == "PersistentVolumeClaim" else owner) for d in applied_docs}
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(rendered_docs, key=key) == sorted(applied_docs, key=key)

    by_kind = {d["kind"]: d for d in rendered_docs if d["metadata"]["name"] in ("production-db", "production-db-backup")}
    sts = by_kind["StatefulSet"]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "100Gi"
    assert by_kind["CronJob"]["spec"]["schedule"] == "0 2 * * *"
    services = sorted(d["metadata"]["name"] for d in rendered_docs if d["kind"] == "Service")
    assert services == ["production-db", "production-db-headless", "production-db-ro"]
