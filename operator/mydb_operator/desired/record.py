"""The ConfigMap that records the primary (model/record.py): its body. Pure."""

from __future__ import annotations

from typing import Any

from .. import names
from ..model.record import PrimaryRecord


def record_configmap(namespace: str, release: str, record: PrimaryRecord) -> dict[str, Any]:
    """No ownerReference: like the data claims and the credentials, it outlives a MyDatabase deleted with
    deletionPolicy Retain, so the same database made again knows which volume holds the newest data."""
    metadata: dict[str, Any] = {
        "name": names.primary_record(release),
        "namespace": namespace,
        "labels": {
            **names.selector_labels(release),
            names.MANAGED_BY_LABEL: names.OPERATOR_NAME,
            names.RECORD_LABEL: "primary",
        },
    }
    if record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": record.data()}
