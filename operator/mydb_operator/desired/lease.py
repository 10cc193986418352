"""The primary lease's body (model/lease.py). Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import names
from ..model.lease import HANDOVER_SECONDS, MEMBERS_ANNOTATION
from ..model.timestamps import micro_time


def lease_body(
    namespace: str,
    release: str,
    holder: str,
    members: tuple[str, ...],
    now: datetime,
    resource_version: str,
) -> dict[str, Any]:
    """HOLDER and MEMBERS, written over RESOURCE_VERSION (empty: created). Its renewTime is the holder's to
    keep; the operator sets it when it names a new one. Kept and deleted with the record of the same name."""
    metadata: dict[str, Any] = {
        "name": names.primary_record(release),
        "namespace": namespace,
        "labels": {**names.selector_labels(release), names.MANAGED_BY_LABEL: names.OPERATOR_NAME},
        "annotations": {MEMBERS_ANNOTATION: ",".join(members)},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    moment = micro_time(now)
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": int(HANDOVER_SECONDS),
        "acquireTime": moment,
        "renewTime": moment,
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}
