"""Backups seen from Kubernetes: on-demand requests and the health of scheduled ones. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import names
from ..model.versions import major

VERIFY = "verify"  # the on-demand label's value on a verification Job


def requested(annotations: Mapping[str, str], status: Mapping[str, Any]) -> str | None:
    """The on-demand backup request not yet turned into a Job, if any."""
    token = (annotations or {}).get(names.BACKUP_NOW_ANNOTATION)
    if not token or token == ((status or {}).get("backup") or {}).get("lastOnDemandRequest"):
        return None
    return token


def verification_requested(annotations: Mapping[str, str], status: Mapping[str, Any]) -> str | None:
    """The verify-backup request not yet turned into a Job, if any."""
    token = (annotations or {}).get(names.VERIFY_BACKUP_ANNOTATION)
    if not token or token == ((status or {}).get("backup") or {}).get("lastVerificationRequest"):
        return None
    return token


def verification_due(verify: bool, status: Mapping[str, Any]) -> str | None:
    """With backup.verify, the backup Job whose base backup is not verified yet: the newest success, when it
    took a base backup (status/build.py counts it as one), and no verification has been started for it."""
    backup = (status or {}).get("backup") or {}
    job, when = backup.get("lastSuccessfulJob"), backup.get("lastSuccessfulTime")
    if not verify or not job or when != backup.get("lastBaseBackup") or job == backup.get("lastVerifiedBackup"):
        return None
    return str(job)


def is_verification(job: Mapping[str, Any]) -> bool:
    return ((job.get("metadata") or {}).get("labels") or {}).get(names.ON_DEMAND_BACKUP_LABEL) == VERIFY


def is_major_upgrade(job: Mapping[str, Any]) -> bool:
    """A major upgrade's Job (desired/upgrade_job.py), which is no backup."""
    return ((job.get("metadata") or {}).get("labels") or {}).get(names.COMPONENT_LABEL) == names.MAJOR_UPGRADE_COMPONENT


def verification(jobs: list[dict[str, Any]], job_name: str | None, known: Mapping[str, Any]) -> dict[str, Any]:
    """status.backup.lastVerification: how the Job JOB_NAME went; as last known once the Job is gone."""
    job = next((j for j in jobs if j["metadata"]["name"] == job_name), None)
    if job_name is None or (job is None and known.get("job") == job_name):
        return dict(known)
    if job is None:
        return {"job": job_name, "result": "Running"}  # just made: the cache has not seen it yet
    for kind, result in (("Complete", "Succeeded"), ("Failed", "Failed")):
        when = _finished(job, kind)
        if when:
            return {"job": job_name, "result": result, "finishedAt": when}
    return {"job": job_name, "result": "Running"}


def first_backup_due(continuous: bool, previous: Mapping[str, Any]) -> bool:
    """A database with the continuous archive has nothing to recover from until a base backup exists (a new
    one, or one whose backups were dumps only until now): the first is taken as soon as it is Ready, once,
    instead of at its next schedule (up to a day later)."""
    backup = (previous or {}).get("backup") or {}
    return (
        continuous
        and previous.get("ready") is True
        and not backup.get("lastBaseBackup")
        and not backup.get("firstBackupJob")
    )


EARLIER_MAJORS = "earlierMajors"  # status.backup: the archives of the majors a database was upgraded from


def for_a_new_major(previous: Mapping[str, Any], from_version: str, until: str) -> dict[str, Any]:
    """The status to go on from once a major upgrade succeeded. The archive, its base backups and the first
    base backup's Job were the old major's: they are listed under earlierMajors (their files are under
    postgresql-<major>/ on the backup volume, scripts/archive-major.sh) and the new major's start empty, so
    its first base backup is taken at once."""
    backup = dict(previous.get("backup") or {})
    old = {key: backup.pop(key) for key in ("archive", "baseBackups", "firstRecoverablePoint") if key in backup}
    backup.pop("lastBaseBackup", None)
    backup.pop("firstBackupJob", None)
    old_major = major(from_version)
    entry: dict[str, Any] = {"major": old_major, "directory": f"postgresql-{old_major}", "until": until}
    if old.get("baseBackups"):
        entry["baseBackups"] = old["baseBackups"]
        entry["firstRecoverablePoint"] = old.get("firstRecoverablePoint") or old["baseBackups"][0]
    kept = [e for e in backup.get(EARLIER_MAJORS) or [] if e.get("major") != old_major]
    backup[EARLIER_MAJORS] = [*kept, entry]
    return {**previous, "backup": backup}


def _finished(job: dict[str, Any], kind: str) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            when: str = condition.get("lastTransitionTime") or ""
            return when
    return None


def facts(cronjob: dict[str, Any] | None, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Last schedule, last success and last failure, from the CronJob and its Jobs (scheduled or on demand)."""
    cron_status = (cronjob or {}).get("status") or {}
    jobs = [j for j in jobs if not is_verification(j) and not is_major_upgrade(j)]
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
    verified = facts.get("lastVerification") or {}
    if verified.get("result") == "Failed":
        return (
            False,
            "VerificationFailed",
            f"the last verification failed: Job {verified['job']} at {verified.get('finishedAt')} (its log says "
            "why); the newest base backup and the archive may not recover",
        )
    if succeeded:
        return True, "BackupSucceeded", f"the last backup succeeded at {succeeded}"
    return True, "NoBackupYet", "no backup has run yet"
