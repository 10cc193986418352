"""An on-demand backup: a new backup-now annotation value becomes one Job, once."""

from __future__ import annotations

import logging
from typing import Any

from .. import names
from ..cluster import reads, writes
from ..cluster.failures import API_FAILURES, failure_detail, refused
from ..desired.backup_job import on_demand_job
from ..model.observation import Observation
from ..policy.backups import requested
from ..status.warnings import Event

log = logging.getLogger(__name__)


async def backup_on_demand(
    namespace: str, name: str, annotations: dict[str, str], previous: dict[str, Any], observed: Observation
) -> tuple[dict[str, str], list[Event]]:
    """Turn a new myapp.example.com/backup-now annotation into a Job, once per value."""
    earlier = {k: v for k, v in (previous.get("backup") or {}).items() if k.startswith("lastOnDemand")}
    token = requested(annotations, previous)
    if token is None:
        return earlier, []
    if observed.cronjob is None:
        return {"lastOnDemandRequest": token}, [
            ("Warning", "BackupNotConfigured", f"backup-now={token} ignored: spec.backup is not set")
        ]
    try:
        # The cache keeps only the CronJob's schedule and status: its Job template is read now.
        cronjob = await reads.read_cronjob(namespace, names.backup_cronjob(name))
        if cronjob is None:  # deleted since: Helm puts it back, and the next pass answers the request
            return earlier, []
        job = on_demand_job(cronjob, name, token)
        await writes.create_job_once(job)
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
