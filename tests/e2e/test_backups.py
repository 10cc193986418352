"""Backups seen from Kubernetes: on-demand requests, failure alerts, restore into a new database."""

from __future__ import annotations

import copy
import json

import pytest

from .conftest import wait_ready
from .test_lifecycle import condition, status, warning_reasons
from .test_operator import apply_db
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
WITH_BACKUP = {"replicas": 1, "version": "15.2", "storage": "1Gi", "backup": {"schedule": "0 2 * * *"}}


def test_backup_now_annotation_runs_one_job(cluster, operator, namespace):
    """backup-now=<token> becomes one Job from the CronJob's template; it succeeds and status says so. (Before
    it, the continuous archive's first base backup: one Job of its own once the database is Ready.)"""
    apply_db(cluster, namespace, "bk", WITH_BACKUP)
    wait_ready(cluster, namespace, "bk")
    first_base = wait_for("the first base backup", lambda: (lambda b: b.get("lastSuccessfulJob") == b.get(
        "firstBackupJob") and b.get("firstBackupJob"))(status(cluster, namespace, "bk").get("backup", {})))
    cluster.kubectl("annotate", "-n", namespace, "mydb/bk", "myapp.example.com/backup-now=first")
    job_name = wait_for("on-demand Job in status", lambda: status(cluster, namespace, "bk")
                        .get("backup", {}).get("lastOnDemandJob"))
    job = get_json(cluster, "-n", namespace, "job", job_name)
    assert job["metadata"]["ownerReferences"][0]["name"] == "bk-backup"
    cron = get_json(cluster, "-n", namespace, "cronjob", "bk-backup")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == \
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    wait_for("success recorded", lambda: status(cluster, namespace, "bk").get("backup", {})
             .get("lastSuccessfulJob") == job_name)
    assert condition(cluster, namespace, "bk", "BackupHealthy")["status"] == "True"

    # The same value again is the same request: no Job for it. A later new value
    # shows the operator has looked at the CR since, and made one Job only.
    cluster.kubectl("annotate", "-n", namespace, "--overwrite", "mydb/bk", "myapp.example.com/backup-now=first")
    cluster.kubectl("label", "-n", namespace, "mydb/bk", "touched=yes")
    cluster.kubectl("annotate", "-n", namespace, "--overwrite", "mydb/bk", "myapp.example.com/backup-now=second")
    second = wait_for("second Job", lambda: (lambda b: b.get("lastOnDemandRequest") == "second"
                                             and b.get("lastOnDemandJob"))(status(cluster, namespace, "bk")
                                                                             .get("backup", {})))
    jobs = sorted(j["metadata"]["name"] for j in get_json(cluster, "-n", namespace, "jobs")["items"])
    assert jobs == sorted([first_base, job_name, second])


def test_failed_backup_turns_condition_false_with_one_warning(cluster, operator, namespace):
    """A backup Job whose pod fails (kwok failure label) flips BackupHealthy to False and posts a Warning."""
    apply_db(cluster, namespace, "flaky", WITH_BACKUP)
    wait_ready(cluster, namespace, "flaky")
    cron = get_json(cluster, "-n", namespace, "cronjob", "flaky-backup")
    template = copy.deepcopy(cron["spec"]["jobTemplate"])
    template["spec"]["template"]["metadata"]["labels"]["kwok.mydb.local/fail"] = "true"
    failing = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "flaky-backup-manual", "labels": template["metadata"]["labels"]},
               "spec": template["spec"]}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(failing))
    wait_for("BackupHealthy False", lambda: condition(cluster, namespace, "flaky", "BackupHealthy")
             .get("reason") == "BackupFailed", timeout=120)
    assert "flaky-backup-manual" in condition(cluster, namespace, "flaky", "BackupHealthy")["message"]
    assert status(cluster, namespace, "flaky")["backup"]["lastFailedJob"] == "flaky-backup-manual"
    wait_for("one Warning", lambda: warning_reasons(cluster, namespace, "flaky").count("BackupFailed") == 1)

    cluster.kubectl("annotate", "-n", namespace, "mydb/flaky", "myapp.example.com/backup-now=retry")
    wait_for("healthy again", lambda: condition(cluster, namespace, "flaky", "BackupHealthy")
             .get("status") == "True", timeout=120)
    assert warning_reasons(cluster, namespace, "flaky").count("BackupFailed") == 1


def test_backup_now_without_backup_spec_is_refused_visibly(cluster, operator, namespace):
    """Asking for a backup of a database with no spec.backup makes a Warning, not a silent no-op."""
    apply_db(cluster, namespace, "nobk", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "nobk")
    cluster.kubectl("annotate", "-n", namespace, "mydb/nobk", "myapp.example.com/backup-now=please")
    wait_for("Warning", lambda: "BackupNotConfigured" in warning_reasons(cluster, namespace, "nobk"))
    assert get_json(cluster, "-n", namespace, "jobs")["items"] == []


def test_restore_into_a_new_database(cluster, operator, namespace):
    """spec.restore waits for the source's backups volume, then mounts it read-only into the new database."""
    apply_db(cluster, namespace, "copy", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                          "restore": {"fromDatabase": "origin"}})
    wait_for("RestoreSourceMissing", lambda: condition(cluster, namespace, "copy", "Ready").get("reason")
             == "RestoreSourceMissing")
    apply_db(cluster, namespace, "origin", WITH_BACKUP)
    wait_ready(cluster, namespace, "origin")
    wait_ready(cluster, namespace, "copy", timeout=180)
    pod_spec = get_json(cluster, "-n", namespace, "statefulset", "copy")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    assert volumes["restore-source"]["persistentVolumeClaim"]["claimName"] == "origin-backups"
    [bootstrap] = [c for c in pod_spec["initContainers"] if c["name"] == "bootstrap"]  # the first boot restores there
    env = {e["name"]: e.get("value") for e in bootstrap["env"]}
    assert env["RESTORE_FROM"] == "latest"
