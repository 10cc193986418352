"""Backups seen from Kubernetes: on-demand requests and the health of scheduled ones. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import names


def requested(annotations: Mapping[str, str], status: Mapping[str, Any]) -> str | None:
    """The on-demand backup request not yet turned into a Job, if any."""
    token = (annotations or {}).get(names.BACKUP_NOW_ANNOTATION)
    if not token or token == ((status or {}).get("backup") or {}).get("lastOnDemandRequest"):
        return None
    return token


def _finished(job: dict[str, Any], kind: str) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            when: str = condition.get("lastTransitionTime") or ""
            return when
    return None


def facts(cronjob: dict[str, Any] | None, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Last schedule, last success and last failure, from the CronJob and its Jobs (scheduled or on demand)."""
    cron_status = (cronjob or {}).get("status") or {}
    result: dict[str, Any] = {}
    if cron_status.get("lastScheduleTime"):
        result["lastScheduleTime"] = cron_status["lastScheduleTime"]
    successes = sorted((_finished(j, "Complete"), j["metadata"]["name"]) for j in jobs if _finished(j, "Complete"))
    failures = sorted((_finished(j, "Failed"), j["metadata"]["name"]) for j in jobs if _finished(j, "Failed"))
    last_success = max(
        [t for t in [cron_status.get("lastSuccessfulTime")] if t] + [t for t, _ in successes], default=None
    )
    if last_success:
        result["lastSuccessfulTime"] = last_success
    if successes:
        result["lastSuccessfulJob"] = successes[-1][1]
    if failures:
        result["lastFailedTime"], result["lastFailedJob"] = failures[-1]
    return result


def health(facts: dict[str, Any]) -> tuple[bool, str, str]:
    """(healthy, reason, message) for the BackupHealthy condition: false while the last backup failed."""
    failed, succeeded = facts.get("lastFailedTime"), facts.get("lastSuccessfulTime")
    if failed and (not succeeded or failed > succeeded):
        return False, "BackupFailed", f"the last backup failed: Job {facts['lastFailedJob']} at {failed}"
    if succeeded:
        return True, "BackupSucceeded", f"the last backup succeeded at {succeeded}"
    return True, "NoBackupYet", "no backup has run yet"
