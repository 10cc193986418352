"""A database whose PostgreSQL image the registry lacks says so in its status; it never hangs silently."""

from __future__ import annotations

import json

import pytest

from .test_real_postgres import SEED
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e


def test_missing_image_is_reported_in_status(cluster, real_operator, namespace):
    """PostgreSQL 16.1 has no image in the local registry: the pod cannot pull it, and the MyDatabase
    goes Degraded with the pod and the pull failure named in its Ready condition."""
    body = {**SEED, "metadata": {"name": "no-image"}, "spec": {**SEED["spec"], "replicas": 1, "version": "16.1"}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))

    def degraded():
        status = get_json(cluster, "-n", namespace, "mydb", "no-image").get("status", {})
        ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
        return ready if status.get("phase") == "Degraded" else None
    ready = wait_for("phase Degraded", degraded, timeout=120)
    assert ready["status"] == "False" and ready["reason"] == "PodsFailing"
    assert "no-image-0" in ready["message"]
    assert "ErrImagePull" in ready["message"] or "ImagePullBackOff" in ready["message"]
