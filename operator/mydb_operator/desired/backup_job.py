"""The Jobs made on demand from the backup CronJob's template: a backup, as `kubectl create job --from` makes
it, and a verification of the newest base backup and the archive (scripts/verify.sh). Pure."""

from __future__ import annotations

import copy
from typing import Any

from .. import names


def on_demand_job(cronjob: dict[str, Any], release: str, token: str, name: str = "") -> dict[str, Any]:
    """A Job from the CronJob's template, as `kubectl create job --from=cronjob/...` makes it (named NAME,
    else after the token)."""
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    metadata = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name or names.on_demand_backup_job(release, token),
            "namespace": cronjob["metadata"]["namespace"],
            "labels": {**(metadata.get("labels") or {}), names.ON_DEMAND_BACKUP_LABEL: "on-demand"},
            "annotations": {
                **(metadata.get("annotations") or {}),
                "cronjob.kubernetes.io/instantiate": "manual",
                names.BACKUP_NOW_ANNOTATION: token,
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": cronjob["metadata"]["name"],
                    "uid": cronjob["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }


VERIFY_DIR = "/verify"


def verification_job(cronjob: dict[str, Any], release: str, token: str, scratch: str) -> dict[str, Any]:
    """The backup Job's pod running verify.sh instead: a recovery of the newest base backup and the archive
    into a scratch emptyDir of SCRATCH (the database's size: the copy is that big), tried once. The scratch
    volume counts against no ephemeral-storage limit of the container: the copy is not the backup's own."""
    job = on_demand_job(cronjob, release, token)
    job["metadata"]["name"] = names.verification_job(release, token)
    job["metadata"]["labels"][names.ON_DEMAND_BACKUP_LABEL] = "verify"
    annotations = job["metadata"]["annotations"]
    del annotations[names.BACKUP_NOW_ANNOTATION]
    annotations[names.VERIFY_BACKUP_ANNOTATION] = token
    spec = job["spec"]
    spec["backoffLimit"] = 0
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    container["command"] = ["/bin/sh", "/scripts/verify.sh"]
    container["env"] = [*(container.get("env") or []), {"name": "VERIFY_DIR", "value": VERIFY_DIR}]
    container["volumeMounts"] = [*(container.get("volumeMounts") or []), {"name": "verify", "mountPath": VERIFY_DIR}]
    limits = (container.get("resources") or {}).get("limits") or {}
    limits.pop("ephemeral-storage", None)
    pod["volumes"] = [*(pod.get("volumes") or []), {"name": "verify", "emptyDir": {"sizeLimit": scratch}}]
    return job
