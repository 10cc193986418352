"""Backups on demand: a new backup-now (or verify-backup) annotation value becomes one Job, once; and a new
database's first base backup."""

from __future__ import annotations

import logging
from typing import Any

from .. import names
from ..cluster.api import ApiPort
from ..cluster.failures import API_FAILURES, failure_detail, refused
from ..desired.backup_job import on_demand_job, verification_job
from ..model.observation import Observation
from ..policy.backups import first_backup_due, requested, verification_due, verification_requested
from ..status.warnings import Event

log = logging.getLogger(__name__)
FIRST_JOB = "firstBackupJob"  # status.backup: the Job of a new database's first base backup


async def backup_on_demand(
    api: ApiPort,
    namespace: str,
    name: str,
    annotations: dict[str, str],
    previous: dict[str, Any],
    observed: Observation,
    continuous: bool = False,
    major: int = 0,
) -> tuple[dict[str, str], list[Event]]:
    """Turn a new myapp.example.com/backup-now annotation into a Job, once per value; with the continuous
    archive, start the first base backup (of the archive at MAJOR) once the database is Ready."""
    earlier = {
        k: v for k, v in (previous.get("backup") or {}).items() if k.startswith("lastOnDemand") or k == FIRST_JOB
    }
    token = requested(annotations, previous)
    if token is None:
        if observed.cronjob is not None and first_backup_due(continuous, previous):
            return await first_backup(api, namespace, name, earlier, major)
        return earlier, []
    if observed.cronjob is None:
        return {"lastOnDemandRequest": token}, [
            ("Warning", "BackupNotConfigured", f"backup-now={token} ignored: spec.backup is not set")
        ]
    try:
        # The cache keeps only the CronJob's schedule and status: its Job template is read now.
        cronjob = await api.read_cronjob(namespace, names.backup_cronjob(name))
        if cronjob is None:  # deleted since: Helm puts it back, and the next pass answers the request
            return earlier, []
        job = on_demand_job(cronjob, name, token)
        await api.create_job_once(job)
    except API_FAILURES as error:
        if refused(error):  # a quota or a policy: answered, once; a new annotation value asks again
            return {"lastOnDemandRequest": token}, [
                ("Warning", "BackupRequestFailed", f"backup-now={token}: {failure_detail(error)}")
            ]
        # Unreachable: the request stays open for the next pass; the rest of this one is still stored.
        log.warning("%s/%s: backup-now=%s waits: %s", namespace, name, token, failure_detail(error))
        return earlier, []
    log.info("%s/%s: on-demand backup %s started as Job %s", namespace, name, token, job["metadata"]["name"])
    return (
        {"lastOnDemandRequest": token, "lastOnDemandJob": job["metadata"]["name"]},
        [("Normal", "BackupRequested", f"backup-now={token}: started Job {job['metadata']['name']}")],
    )


async def first_backup(
    api: ApiPort, namespace: str, name: str, earlier: dict[str, str], major: int
) -> tuple[dict[str, str], list[Event]]:
    """The first base backup of the archive at MAJOR, as one Job from the CronJob (kept once made)."""
    try:
        cronjob = await api.read_cronjob(namespace, names.backup_cronjob(name))
        if cronjob is None:
            return earlier, []
        job = on_demand_job(cronjob, name, "first", names.first_base_backup_job(name, major))
        await api.create_job_once(job)
    except API_FAILURES as error:  # tried again on the next pass; never a reason to fail this one
        log.warning("%s/%s: the first base backup waits: %s", namespace, name, failure_detail(error))
        return earlier, []
    made = job["metadata"]["name"]
    log.info("%s/%s: the first base backup started as Job %s", namespace, name, made)
    return (
        {**earlier, FIRST_JOB: made},
        [("Normal", "BackupRequested", f"the continuous archive's first base backup: started Job {made}")],
    )


async def verify_on_demand(
    api: ApiPort,
    namespace: str,
    name: str,
    annotations: dict[str, str],
    previous: dict[str, Any],
    observed: Observation,
    scratch: str,
    verify_each: bool = False,
) -> tuple[dict[str, str], list[Event]]:
    """Turn a new myapp.example.com/verify-backup value into one verification Job (scripts/verify.sh); with
    backup.verify, start one for each new base backup."""
    earlier = {
        k: v
        for k, v in (previous.get("backup") or {}).items()
        if k in ("lastVerificationRequest", "lastVerificationJob", "lastVerifiedBackup")
    }
    token = verification_requested(annotations, previous)
    if token is None:
        backup_job = verification_due(verify_each, previous)
        if backup_job is None or observed.cronjob is None:
            return earlier, []
        made, events = await start_verification(api, namespace, name, backup_job, scratch, f"after {backup_job}")
        if made is None:
            return earlier, events
        return {**earlier, "lastVerificationJob": made, "lastVerifiedBackup": backup_job}, events
    if observed.cronjob is None:
        return {**earlier, "lastVerificationRequest": token}, [
            ("Warning", "BackupNotConfigured", f"verify-backup={token} ignored: spec.backup is not set")
        ]
    made, events = await start_verification(api, namespace, name, token, scratch, f"verify-backup={token}")
    if made is None:  # refused (a quota, a policy): answered, once; unreachable: the request stays open
        return ({**earlier, "lastVerificationRequest": token} if events else earlier), events
    return {**earlier, "lastVerificationRequest": token, "lastVerificationJob": made}, events


async def start_verification(
    api: ApiPort, namespace: str, name: str, token: str, scratch: str, why: str
) -> tuple[str | None, list[Event]]:
    """One verification Job from the CronJob's template (made once per token): its name, or None and why not."""
    try:
        cronjob = await api.read_cronjob(namespace, names.backup_cronjob(name))
        if cronjob is None:
            return None, []
        job = verification_job(cronjob, name, token, scratch)
        await api.create_job_once(job)
    except API_FAILURES as error:
        if refused(error):
            return None, [("Warning", "BackupRequestFailed", f"{why}: {failure_detail(error)}")]
        log.warning("%s/%s: %s waits: %s", namespace, name, why, failure_detail(error))
        return None, []
    made = job["metadata"]["name"]
    log.info("%s/%s: %s: verification started as Job %s", namespace, name, why, made)
    return made, [("Normal", "VerificationRequested", f"{why}: started Job {made}")]
