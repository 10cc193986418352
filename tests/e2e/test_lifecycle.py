"""Lifecycle beyond Helm, end to end: storage growth, version changes, hibernation, credentials."""

from __future__ import annotations

import base64
import json
import threading

import pytest
from kubernetes import client, config, watch

from .conftest import wait_ready
from .test_operator import apply_db
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e


def status(cluster, namespace: str, name: str) -> dict:
    return get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}


def condition(cluster, namespace: str, name: str, type_: str) -> dict:
    return next((c for c in status(cluster, namespace, name).get("conditions", []) if c["type"] == type_), {})


def patch_spec(cluster, namespace: str, name: str, spec: dict) -> None:
    cluster.kubectl("patch", "-n", namespace, f"mydb/{name}", "--type=merge", "-p", json.dumps({"spec": spec}))


def pod_uids(cluster, namespace: str, name: str) -> dict[str, str]:
    pods = get_json(cluster, "-n", namespace, "pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def warning_reasons(cluster, namespace: str, name: str) -> list[str]:
    events = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"involvedObject.kind=MyDatabase,involvedObject.name={name},type=Warning")
    return [e["reason"] for e in events.get("items", [])]


def test_storage_grows_without_restarting_pods(cluster, operator, namespace):
    """Raising spec.storage grows every claim and re-creates the StatefulSet around its running pods."""
    apply_db(cluster, namespace, "grow", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "grow")
    before = pod_uids(cluster, namespace, "grow")
    patch_spec(cluster, namespace, "grow", {"storage": "3Gi"})

    def template_size():
        sts = get_json(cluster, "-n", namespace, "statefulset", "grow")
        return sts and sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    wait_for("claim template at 3Gi", lambda: template_size() == "3Gi")
    wait_for("claims at 3Gi", lambda: sorted(
        c["status"].get("capacity", {}).get("storage") for c in get_json(cluster, "-n", namespace, "pvc")["items"]
    ) == ["3Gi", "3Gi"])
    # Not "Resizing False" alone: a database at rest shows that before the resize starts.
    wait_for("lastOperation Resize succeeded", lambda: (lambda op: (op.get("type"), op.get("result")))(
        status(cluster, namespace, "grow").get("lastOperation", {})) == ("Resize", "Succeeded"))
    assert condition(cluster, namespace, "grow", "Resizing")["reason"] == "AtRequestedSize"
    wait_ready(cluster, namespace, "grow")
    assert pod_uids(cluster, namespace, "grow") == before, "pods were restarted by the resize"


def test_growth_refused_where_the_class_cannot_expand(cluster, operator, namespace):
    """A StorageClass without allowVolumeExpansion: a condition and a Warning say so; the database keeps running."""
    apply_db(cluster, namespace, "stuck", {"replicas": 1, "version": "15.2", "storage": "1Gi",
                                           "storageClassName": "fixed-size"})
    wait_ready(cluster, namespace, "stuck")
    patch_spec(cluster, namespace, "stuck", {"storage": "2Gi"})
    wait_for("refusal in status", lambda: condition(cluster, namespace, "stuck", "Resizing").get("reason")
             == "ExpansionNotSupported")
    assert "does not allow volume expansion" in condition(cluster, namespace, "stuck", "Resizing")["message"]
    wait_for("Warning event", lambda: "ExpansionNotSupported" in warning_reasons(cluster, namespace, "stuck"))
    assert status(cluster, namespace, "stuck")["phase"] == "Running"
    claim = get_json(cluster, "-n", namespace, "pvc", "data-stuck-0")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    sts = get_json(cluster, "-n", namespace, "statefulset", "stuck")
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert warning_reasons(cluster, namespace, "stuck").count("ExpansionNotSupported") == 1


def test_growth_a_quota_refuses_is_told_then_goes_through_once_the_quota_allows(cluster, operator, namespace):
    """The API server refuses the claim's growth (a ResourceQuota on requests.storage): status and a Warning
    quote its message and Helm waits; raised quota, the next retry grows the claim."""
    apply_db(cluster, namespace, "quota", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "quota")
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "storage"},
             "spec": {"hard": {"requests.storage": "1536Mi"}}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(quota))
    wait_for("quota counted by the controller manager", lambda: (get_json(
        cluster, "-n", namespace, "resourcequota", "storage").get("status") or {}).get("used", {})
        .get("requests.storage") == "1Gi")
    revision = status(cluster, namespace, "quota")["release"]["revision"]
    patch_spec(cluster, namespace, "quota", {"storage": "2Gi"})
    wait_for("refusal in status", lambda: condition(cluster, namespace, "quota", "Ready").get("reason")
             == "ResizeFailed")
    message = condition(cluster, namespace, "quota", "Ready")["message"]
    assert message.startswith("growing the claims to 2Gi: ") and "exceeded quota: storage" in message, message
    wait_for("Warning event", lambda: "ResizeFailed" in warning_reasons(cluster, namespace, "quota"))
    assert status(cluster, namespace, "quota")["release"]["revision"] == revision  # Helm waited
    assert get_json(cluster, "-n", namespace, "pvc", "data-quota-0")["spec"]["resources"]["requests"]["storage"] == "1Gi"

    cluster.kubectl("patch", "-n", namespace, "resourcequota/storage", "--type=merge",
                    "-p", json.dumps({"spec": {"hard": {"requests.storage": "4Gi"}}}))
    wait_for("claim grown", lambda: get_json(cluster, "-n", namespace, "pvc", "data-quota-0")
             ["spec"]["resources"]["requests"]["storage"] == "2Gi", timeout=90)
    wait_ready(cluster, namespace, "quota")
    assert status(cluster, namespace, "quota")["lastOperation"]["type"] == "Resize"


@pytest.mark.long
def test_minor_version_change_rolls_replicas_first_primary_last(cluster, operator, namespace):
    """15.2 -> 15.4 replaces the pods from the highest ordinal down: the primary (ordinal 0) last."""
    apply_db(cluster, namespace, "roll", {"replicas": 3, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "roll")
    core = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    deleted: list[str] = []
    watcher = watch.Watch()

    def record():
        for event in watcher.stream(core.list_namespaced_pod, namespace, label_selector="app.kubernetes.io/instance=roll",
                                    timeout_seconds=120):
            if event["type"] == "DELETED":
                deleted.append(event["object"].metadata.name)
            if "roll-0" in deleted:
                watcher.stop()
    thread = threading.Thread(target=record, daemon=True)
    thread.start()
    patch_spec(cluster, namespace, "roll", {"version": "15.4"})
    thread.join(timeout=120)
    # The order in which each pod was first replaced (a loaded controller may replace one twice).
    assert list(dict.fromkeys(deleted)) == ["roll-2", "roll-1", "roll-0"], deleted
    wait_for("deployed at 15.4", lambda: status(cluster, namespace, "roll").get("image", "").endswith(":15.4"))
    wait_ready(cluster, namespace, "roll")
    assert status(cluster, namespace, "roll")["lastOperation"]["type"] == "VersionChange"
    assert status(cluster, namespace, "roll")["pendingRestart"] is False


def test_an_earlier_major_is_refused_with_the_supported_path(cluster, operator, namespace):
    """16 -> 15 in place is refused at admission, with the supported path in the message; 16.1 -> 16.4 is not."""
    apply_db(cluster, namespace, "major", {"replicas": 1, "version": "16.1", "storage": "1Gi"})
    refused = cluster.kubectl("patch", "-n", namespace, "mydb/major", "--type=merge", "-p",
                              '{"spec":{"version":"15.2"}}', check=False)
    assert refused.returncode != 0
    assert "spec.version" in refused.stderr and "restore" in refused.stderr
    patch_spec(cluster, namespace, "major", {"version": "16.4"})
    wait_ready(cluster, namespace, "major")


def test_hibernation_keeps_data_and_replicas(cluster, operator, namespace):
    """hibernate: true runs no pods, keeps spec.replicas and the claims; waking needs nothing else."""
    apply_db(cluster, namespace, "sleepy", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "sleepy")
    patch_spec(cluster, namespace, "sleepy", {"hibernate": True})
    wait_for("Hibernated with no pods", lambda: status(cluster, namespace, "sleepy").get("phase") == "Hibernated"
             and not pod_uids(cluster, namespace, "sleepy"))
    ready = condition(cluster, namespace, "sleepy", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Hibernated")
    assert get_json(cluster, "-n", namespace, "mydb", "sleepy")["spec"]["replicas"] == 2
    assert len(get_json(cluster, "-n", namespace, "pvc")["items"]) == 2
    patch_spec(cluster, namespace, "sleepy", {"hibernate": False})
    wait_ready(cluster, namespace, "sleepy")
    assert status(cluster, namespace, "sleepy")["readyReplicas"] == 2
    assert status(cluster, namespace, "sleepy")["lastOperation"]["type"] == "Wake"


def test_generated_secret_has_connection_uris(cluster, operator, namespace):
    """The operator's Secret carries URIs for the read-write and read-only Services, which ask for TLS with the
    server's name verified, and the CA to verify it with."""
    apply_db(cluster, namespace, "uris", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "uris")
    data = get_json(cluster, "-n", namespace, "secret", "uris-credentials")["data"]
    text = {k: base64.b64decode(v).decode() for k, v in data.items()}
    assert text["uri"] == (f"postgresql://postgres:{text['password']}@uris.{namespace}.svc:5432/postgres"
                           "?sslmode=verify-full")
    assert text["uri-ro"].startswith(f"postgresql://postgres:{text['password']}@uris-ro.{namespace}.svc:5432/")
    server = get_json(cluster, "-n", namespace, "secret", "uris-tls")["data"]
    assert data["ca.crt"] == server["ca.crt"] and "BEGIN CERTIFICATE" in text["ca.crt"]


@pytest.mark.long
def test_existing_secret_is_used_checked_and_never_deleted(cluster, operator, namespace):
    """spec.credentials.secretName: missing -> clear status; present -> used; Delete policy leaves it alone."""
    apply_db(cluster, namespace, "byo", {"replicas": 1, "version": "15.2", "storage": "1Gi",
                                         "deletionPolicy": "Delete", "credentials": {"secretName": "my-creds"}})
    wait_for("CredentialsMissing", lambda: condition(cluster, namespace, "byo", "Ready").get("reason")
             == "CredentialsMissing")
    cluster.kubectl("create", "secret", "generic", "my-creds", "-n", namespace, "--from-literal=username=app",
                    "--from-literal=password=pw1")
    wait_for("CredentialsInvalid", lambda: "replication-password" in
             condition(cluster, namespace, "byo", "Ready").get("message", ""))
    cluster.kubectl("delete", "secret", "my-creds", "-n", namespace)
    cluster.kubectl("create", "secret", "generic", "my-creds", "-n", namespace, "--from-literal=username=app",
                    "--from-literal=password=pw1", "--from-literal=replication-username=rep",
                    "--from-literal=replication-password=pw2")
    wait_ready(cluster, namespace, "byo", timeout=180)
    volumes = get_json(cluster, "-n", namespace, "statefulset", "byo")["spec"]["template"]["spec"]["volumes"]
    # The user's credentials, and the operator's certificate (TLS is on): never a credentials Secret of its own.
    assert {v["secret"]["secretName"] for v in volumes if "secret" in v} == {"my-creds", "byo-tls"}
    assert get_json(cluster, "-n", namespace, "secret", "byo-credentials") == {}
    cluster.kubectl("delete", "-n", namespace, "mydb/byo", "--timeout=60s")
    assert get_json(cluster, "-n", namespace, "secret", "my-creds") != {}


def test_a_foreign_secret_with_a_name_the_database_needs_is_reported_and_left_byte_for_byte(
        cluster, operator, namespace):
    """Another app's Secret `taken-tls`, the name of database `taken`'s server certificate: the database says
    SecretNameTaken (status and one Warning) and installs nothing; the Secret is untouched. Once it is moved
    away, the database comes up."""
    cluster.kubectl("create", "secret", "generic", "taken-tls", "-n", namespace, "--from-literal=tls.crt=not ours")
    before = get_json(cluster, "-n", namespace, "secret", "taken-tls")
    apply_db(cluster, namespace, "taken", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    said = wait_for("SecretNameTaken", lambda: (lambda c: c if c.get("reason") == "SecretNameTaken" else None)(
        condition(cluster, namespace, "taken", "Ready")), timeout=60)
    assert said["message"].startswith(f"Secret taken-tls in namespace {namespace} exists and is not this database's")
    wait_for("one SecretNameTaken Warning", lambda: warning_reasons(cluster, namespace, "taken") == ["SecretNameTaken"],
             timeout=15)
    assert get_json(cluster, "-n", namespace, "statefulset", "taken") == {}
    assert get_json(cluster, "-n", namespace, "secret", "taken-tls") == before
    cluster.kubectl("delete", "secret", "taken-tls", "-n", namespace)
    wait_ready(cluster, namespace, "taken", timeout=180)
    labels = get_json(cluster, "-n", namespace, "secret", "taken-tls")["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "mydb-operator"
