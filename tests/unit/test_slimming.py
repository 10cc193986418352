"""slim(): what the informers' cache keeps of each object is what the reconciles read of it."""

from __future__ import annotations

import copy
from typing import Any

from mydb_operator.cluster.slimming import slim
from mydb_operator.model.pods import serves_tls
from mydb_operator.model.statefulset import claim_template_size, running_version
from mydb_operator.policy.backups import facts

STATEFULSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {
        "name": "db", "namespace": "ns", "resourceVersion": "7", "generation": 2, "uid": "u",
        "labels": {"app.kubernetes.io/instance": "db"},
        "ownerReferences": [{"kind": "MyDatabase", "uid": "owner"}],
        "managedFields": [{"manager": "helm", "fieldsV1": {"f:spec": {}}}],
        "annotations": {"meta.helm.sh/release-name": "db"},
    },
    "spec": {
        "replicas": 3,
        "serviceName": "db-headless",
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "OnDelete"},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "5Gi"}}}}],
        "template": {
            "metadata": {"annotations": {"checksum/scripts": "abc"}},
            "spec": {
                "initContainers": [{"name": "init", "image": "postgres:15.2", "command": ["sh", "-c", "x" * 500]}],
                "containers": [
                    {"name": "postgres", "image": "registry/postgres:15.2", "env": [{"name": "A", "value": "b"}],
                     "readinessProbe": {"exec": {"command": ["pg_isready"]}}},
                    {"name": "exporter", "image": "exporter:1"},
                ],
                "volumes": [{"name": "scripts", "configMap": {"name": "db-scripts"}}],
            },
        },
    },
    "status": {"replicas": 3, "readyReplicas": 2, "updateRevision": "db-1", "observedGeneration": 2},
}
CRONJOB: dict[str, Any] = {
    "metadata": {"name": "db-backup", "namespace": "ns", "labels": {"app.kubernetes.io/instance": "db"}},
    "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{}]}}}}},
    "status": {"lastScheduleTime": "2026-01-01T02:00:00Z", "lastSuccessfulTime": "2026-01-01T02:01:00Z"},
}


def test_a_statefulset_keeps_what_the_reconciles_read_and_loses_its_pod_template() -> None:
    kept = slim("statefulsets", copy.deepcopy(STATEFULSET))
    assert kept["spec"] == {
        "replicas": 3,
        "volumeClaimTemplates": STATEFULSET["spec"]["volumeClaimTemplates"],
        "template": {"spec": {"containers": [{"name": "postgres", "image": "registry/postgres:15.2"},
                                             {"name": "exporter", "image": "exporter:1"}],
                              "volumes": []}},
        "updateStrategy": {"type": STATEFULSET["spec"]["updateStrategy"]["type"]},
        "podManagementPolicy": STATEFULSET["spec"]["podManagementPolicy"],
    }
    assert kept["status"] == STATEFULSET["status"]
    assert "managedFields" not in kept["metadata"] and "annotations" not in kept["metadata"]
    assert kept["metadata"]["ownerReferences"] == STATEFULSET["metadata"]["ownerReferences"]
    # the readers give the same answers from the cached copy as from the whole object
    assert claim_template_size(kept) == claim_template_size(STATEFULSET) == "5Gi"
    assert running_version(kept) == running_version(STATEFULSET) == "15.2"


def test_a_cronjob_keeps_its_schedule_and_status_only() -> None:
    kept = slim("cronjobs", copy.deepcopy(CRONJOB))
    assert kept["spec"] == {"schedule": "0 2 * * *"}
    assert facts(kept, []) == facts(CRONJOB, [])


def test_pods_keep_of_their_spec_only_whether_they_serve_tls_and_their_node_and_services_only_metadata() -> None:
    pod = {"metadata": {"name": "db-0", "labels": {"role": "primary"}}, "spec": {"containers": []},
           "status": {"phase": "Running"}}
    assert slim("pods", pod) == {"metadata": pod["metadata"], "spec": {"volumes": []}, "status": {"phase": "Running"}}
    secured = {**pod, "spec": {"containers": [{}], "volumes": [{"name": "data"}, {"name": "tls", "secret": {"secretName": "db-tls", "defaultMode": 288}}]}}
    assert slim("pods", secured)["spec"] == {"volumes": [{"name": "tls", "secret": {"secretName": "db-tls"}}]}
    assert serves_tls(slim("pods", secured)["spec"]) and not serves_tls(slim("pods", pod)["spec"])
    placed = {**pod, "spec": {"containers": [{}], "nodeName": "node-1"}}  # whose kubelet measures its volume
    assert slim("pods", placed)["spec"] == {"volumes": [], "nodeName": "node-1"}
    service = {"metadata": {"name": "db"}, "spec": {"ports": []}, "status": {}}
    assert slim("services", service) == {"metadata": {"name": "db"}}


def test_claims_are_kept_whole_but_for_managed_fields_and_annotations() -> None:
    claim = {"metadata": {"name": "data-db-0", "managedFields": [{}],
                          "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
             "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}},
             "status": {"capacity": {"storage": "1Gi"}}}
    assert slim("persistentvolumeclaims", claim) == {**claim, "metadata": {"name": "data-db-0"}}


def test_equal_short_strings_of_two_objects_are_one_object() -> None:
    first = slim("statefulsets", copy.deepcopy(STATEFULSET))
    second = slim("statefulsets", copy.deepcopy(STATEFULSET))
    assert first["metadata"]["labels"]["app.kubernetes.io/instance"] is (
        second["metadata"]["labels"]["app.kubernetes.io/instance"]
    )
