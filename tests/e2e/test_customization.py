"""Customization on the live cluster: what the operator applies equals `mydb-operator render`, precedence holds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO, operator_instead, wait_ready
from .test_lifecycle import condition
from .test_operator import apply_db, helm
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
PLATFORM = {
    "values": {
        "image": {"registry": "mirror.example.com"},
        "podAnnotations": {"platform/owner": "dba-team"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
        "postgresql": {"parameters": {"max_connections": "300"}},
    },
    "valuePatches": [{"op": "add", "path": "/podLabels", "value": {"cost-center": "db"}}],
    "objectPatches": [
        {"target": {"kind": "StatefulSet", "name": "*"},
         "patch": [{"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "mydb-databases"}]},
        {"target": {"kind": "Service", "name": "*-ro"},
         "patch": [{"op": "add", "path": "/metadata/annotations", "value": {"lb": "internal"}}]},
    ],
}


@pytest.fixture
def platform_operator(cluster, operator, namespace, tmp_path):
    """An operator with a platform config for this test's namespace (an own_operator test's: sharing.py)."""
    config = tmp_path / "platform.yaml"
    config.write_text(yaml.safe_dump(PLATFORM))
    if cluster.kubectl("get", "priorityclass", "mydb-databases", check=False).returncode != 0:
        cluster.kubectl("create", "priorityclass", "mydb-databases", "--value=1000")
    with operator_instead(operator, namespace, "operator-platform.log", MYDB_PLATFORM_CONFIG=str(config)) as own:
        own.config = config
        yield own


@pytest.mark.own_operator
def test_live_objects_equal_render_and_follow_precedence(cluster, platform_operator, namespace, tmp_path):
    """The release's manifest is exactly `render --platform-config`; the CR beats platform values, patches beat both."""
    spec = {"replicas": 2, "version": "15.2", "storage": "1Gi", "backup": {"schedule": "0 3 * * *"},
            "resources": {"requests": {"cpu": "1"}}, "podAnnotations": {"team": "payments"},
            "postgresql": {"parameters": {"max_connections": "50"}}}
    apply_db(cluster, namespace, "custom", spec)
    wait_ready(cluster, namespace, "custom")

    cr = tmp_path / "cr.yaml"
    cr.write_text(yaml.safe_dump({"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase",
                                  "metadata": {"name": "custom"}, "spec": spec}))
    rendered = subprocess.run(
        [sys.executable, "-m", "mydb_operator.cli", "--helm", cluster.tool("helm"), "--platform-config",
         str(platform_operator.config), "render", "-f", str(cr), "--namespace", namespace],
        check=True, capture_output=True, text=True, cwd=REPO).stdout
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    rendered_docs = sorted((d for d in yaml.safe_load_all(rendered) if d), key=key)
    applied_docs = sorted((d for d in yaml.safe_load_all(helm(cluster, "get", "manifest", "custom", "-n", namespace))
                           if d), key=key)
    for doc in applied_docs:  # the live MyDatabase owns the release; a CR file has no uid to own anything
        doc["metadata"].pop("ownerReferences", None)
    assert rendered_docs == applied_docs

    sts = get_json(cluster, "-n", namespace, "statefulset", "custom")
    pod = sts["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "mirror.example.com/library/postgres:15.2"          # platform value
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "256Mi"}}  # CR's cpu beats, maps merge
    assert pod["metadata"]["annotations"]["team"] == "payments"                       # maps merge: CR's key
    assert pod["metadata"]["annotations"]["platform/owner"] == "dba-team"             # ... and the platform's
    assert pod["metadata"]["labels"]["cost-center"] == "db"                           # value patch
    assert pod["spec"]["priorityClassName"] == "mydb-databases"             # object patch
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert get_json(cluster, "-n", namespace, "service", "custom-ro")["metadata"]["annotations"]["lb"] == "internal"
    config = get_json(cluster, "-n", namespace, "configmap", "custom-scripts")["data"]["postgresql.conf"]
    assert "max_connections = '50'" in config


def test_denied_parameter_is_reported_not_applied(cluster, operator, namespace):
    """An operator-owned PostgreSQL parameter in the CR: Failed with the field named, no release."""
    apply_db(cluster, namespace, "risky", {"replicas": 1, "version": "15.2", "storage": "1Gi",
                                           "postgresql": {"parameters": {"fsync": "off"}}})
    wait_for("InvalidSpec", lambda: condition(cluster, namespace, "risky", "Ready").get("reason") == "InvalidSpec")
    assert "spec.postgresql.parameters: fsync cannot be set" in condition(cluster, namespace, "risky", "Ready")["message"]
    assert "risky" not in helm(cluster, "list", "-n", namespace, "-q").split()
    cluster.kubectl("patch", "-n", namespace, "mydb/risky", "--type=json",
                    "-p", json.dumps([{"op": "remove", "path": "/spec/postgresql"}]))
    wait_ready(cluster, namespace, "risky")
