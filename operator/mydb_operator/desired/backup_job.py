"""The Job an on-demand backup runs: the CronJob's template, as `kubectl create job --from` makes it. Pure."""

from __future__ import annotations

import copy
from typing import Any

from .. import names


def on_demand_job(cronjob: dict[str, Any], release: str, token: str) -> dict[str, Any]:
    """A Job from the CronJob's template, as `kubectl create job --from=cronjob/...` makes it."""
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    metadata = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.on_demand_backup_job(release, token),
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
