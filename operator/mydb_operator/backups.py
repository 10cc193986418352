"""Backups seen from Kubernetes: on-demand requests and the health of scheduled ones. Pure."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from . import api

BACKUP_NOW = f"{api.ANNOTATION_PREFIX}/backup-now"


def requested(annotations: dict[str, str], status: dict[str, Any]) -> str | None:
    """The on-demand backup request not yet turned into a Job, if any."""
    token = (annotations or {}).get(BACKUP_NOW)
    if not token or token == ((status or {}).get("backup") or {}).get("lastOnDemandRequest"):
        return None
    return token


def on_demand_job(cronjob: dict[str, Any], release: str, token: str) -> dict[str, Any]:
    """A Job from the CronJob's template, as `kubectl create job --from=cronjob/...` makes it."""
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    suffix = hashlib.sha256(token.encode()).hexdigest()[:8]
    metadata = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{release}-backup-{suffix}",
            "namespace": cronjob["metadata"]["namespace"],
            "labels": {**(metadata.get("labels") or {}), f"{api.GROUP}/backup": "on-demand"},
            "annotations": {**(metadata.get("annotations") or {}), "cronjob.kubernetes.io/instantiate": "manual",
                            BACKUP_NOW: token},
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob["metadata"]["name"],
                "uid": cronjob["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": template["spec"],
    }


def _finished(job: dict[str, Any], kind: str) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition.get("lastTransitionTime") or ""
    return None


def facts(cronjob: dict[str, Any] | None, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Last schedule, last success and last failure, from the CronJob and its Jobs (scheduled or on demand)."""
    cron_status = (cronjob or {}).get("status") or {}
    result: dict[str, Any] = {}
    if cron_status.get("lastScheduleTime"):
        result["lastScheduleTime"] = cron_status["lastScheduleTime"]
    successes = sorted((_finished(j, "Complete"), j["metadata"]["name"]) for j in jobs if _finished(j, "Complete"))
    failures = sorted((_finished(j, "Failed"), j["metadata"]["name"]) for j in jobs if _finished(j, "Failed"))
    last_success = max([t for t in [cron_status.get("lastSuccessfulTime")] if t] + [t for t, _ in successes],
                       default=None)
    if last_success:
        result["lastSuccessfulTime"] = last_success
    if successes:
        result["lastSuccessfulJob"] = successes[-1][1]
    if failures:
        result["lastFailedTime"], result["lastFailedJob"] = failures[-1]
    return result


def health(found: dict[str, Any]) -> tuple[bool, str, str]:
    """(healthy, reason, message) for the BackupHealthy condition: false while the last backup failed."""
    failed, succeeded = found.get("lastFailedTime"), found.get("lastSuccessfulTime")
    if failed and (not succeeded or failed > succeeded):
        return False, "BackupFailed", f"the last backup failed: Job {found['lastFailedJob']} at {failed}"
    if succeeded:
        return True, "BackupSucceeded", f"the last backup succeeded at {succeeded}"
    return True, "NoBackupYet", "no backup has run yet"
