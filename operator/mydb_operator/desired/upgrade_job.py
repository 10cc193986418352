"""The Job of a major upgrade, from the new major's StatefulSet as the chart renders it. Pure.

Its pod is the database's pod on the primary's volume: the same scheduling,
security contexts, scripts and credentials, so a platform's patches and
policies hold for it too. The old major's image copies its programs into a
scratch volume first (scripts/old-binaries.sh); the new one runs
scripts/major-upgrade.sh. Tried once: a refused check fails the same way
every time, and the data is untouched until pg_upgrade succeeds.

It is built before any pod stops (reconcile/upgrading.py): a Job that cannot be
built refuses the upgrade while the old major still serves."""

from __future__ import annotations

import copy
from typing import Any

from .. import names

Object = dict[str, Any]
OLD_ROOT = "/old"
# Enough for one major's server, share files and libraries (about 100 MB for Debian's 15).
OLD_ROOT_SIZE = "512Mi"
KEPT_VOLUMES = ("scripts", "credentials", "run", "tmp")


class UpgradeJobError(ValueError):
    """The rendered StatefulSet cannot give the upgrade Job: why, in a sentence."""


def major_upgrade_job(
    statefulset: Object, release: str, job_name: str, primary: str, old_image: str, min_free_mb: int
) -> Object:
    """A Job that upgrades PRIMARY's volume to the major STATEFULSET runs, the old programs from OLD_IMAGE.

    MIN_FREE_MB: the room major-upgrade.sh wants beside the data (policy/major_upgrade.py's, checked there
    first against the volume's last figures)."""
    template = copy.deepcopy((statefulset.get("spec") or {}).get("template") or {})
    pod = template.get("spec") or {}
    bootstrap = next((c for c in pod.get("initContainers") or [] if c.get("name") == "bootstrap"), None)
    if bootstrap is None or not bootstrap.get("image"):
        raise UpgradeJobError("the rendered StatefulSet has no bootstrap init container to build it from")
    if bootstrap["image"] == old_image:  # a platform that pins one image for every major: pg_upgrade has no new one
        raise UpgradeJobError(f"the new version renders the image the old one runs ({old_image})")
    mounts = [m for m in bootstrap.get("volumeMounts") or [] if m.get("name") in ("data", *KEPT_VOLUMES)]
    old_mount = {"name": "old", "mountPath": OLD_ROOT}
    env = [e for e in bootstrap.get("env") or [] if e.get("name") in ("PGDATA", "CREDENTIALS_DIR")]
    if not any(m["name"] == "data" for m in mounts) or not any(e["name"] == "PGDATA" for e in env):
        raise UpgradeJobError("its bootstrap init container mounts no data volume or sets no PGDATA")
    metadata = statefulset.get("metadata") or {}
    if not metadata.get("namespace"):
        raise UpgradeJobError("the rendered StatefulSet names no namespace")
    env += [{"name": "OLD_ROOT", "value": OLD_ROOT}, {"name": "MIN_FREE_MB", "value": str(min_free_mb)}]
    common = {
        key: bootstrap[key]
        for key in ("imagePullPolicy", "resources", "securityContext", "terminationMessagePolicy")
        if key in bootstrap
    }
    pod["initContainers"] = [
        {
            **common,
            "name": "old-binaries",
            "image": old_image,
            "command": ["/bin/sh", "/scripts/old-binaries.sh"],
            "env": [{"name": "OLD_ROOT", "value": OLD_ROOT}],
            "volumeMounts": [m for m in mounts if m["name"] in ("scripts", "tmp")] + [old_mount],
        }
    ]
    pod["containers"] = [
        {
            **common,
            "name": "major-upgrade",
            "image": bootstrap["image"],
            "command": ["/bin/sh", "/scripts/major-upgrade.sh"],
            "env": env,
            "volumeMounts": [*mounts, old_mount],
        }
    ]
    claim = f"{names.DATA_CLAIM_TEMPLATE}-{primary}"
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v.get("name") in KEPT_VOLUMES] + [
        {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
        {"name": "old", "emptyDir": {"sizeLimit": OLD_ROOT_SIZE}},
    ]
    pod["restartPolicy"] = "Never"
    pod.pop("terminationGracePeriodSeconds", None)
    labels = {**names.selector_labels(release), names.COMPONENT_LABEL: names.MAJOR_UPGRADE_COMPONENT}
    template["metadata"] = {"labels": labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": metadata["namespace"],
            "labels": labels,
            "ownerReferences": copy.deepcopy(metadata.get("ownerReferences") or []),
        },
        "spec": {"backoffLimit": 0, "template": template},
    }
