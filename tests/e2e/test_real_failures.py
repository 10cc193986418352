"""A database that cannot run says why in its status, in the words of whoever refused it, with one Warning:
the platform (no image for that major), the registry (no such tag), PostgreSQL (its FATAL line), the scheduler
(no node has what the pod asks). Never an endless "0/1 replicas are ready"."""

from __future__ import annotations

import json

import pytest

from .test_real_postgres import SEED
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e

CASES = {  # name: (spec fields, the phase and condition reason expected, words its message must hold)
    "no-major": ({"version": "16.1"}, "Failed", "InvalidSpec",
                 "spec.version: PostgreSQL 16 is not offered by this platform, which has images for 15, 17"),
    "no-image": ({"version": "15.9"}, "Degraded", "PodsFailing", "cannot pull its image"),
    "bad-parameter": ({"postgresql": {"parameters": {"shared_buffers": "lots"}}}, "Degraded", "PodsFailing",
                      'invalid value for parameter "shared_buffers": "lots"'),
    "no-node": ({"resources": {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}}}, "Degraded", "PodsFailing",
                "no-node-0 cannot be scheduled: Insufficient cpu"),
}


def create(cluster, namespace: str, name: str, fields: dict) -> None:
    spec = {**SEED["spec"], "replicas": 1, "version": "15.2", "storage": "1Gi", "backup": None, **fields}
    body = {**SEED, "metadata": {"name": name}, "spec": {k: v for k, v in spec.items() if v is not None}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def ready_condition(cluster, namespace: str, name: str) -> dict:
    status = get_json(cluster, "-n", namespace, "mydb", name).get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return {**ready, "phase": status.get("phase")}


def warnings(cluster, namespace: str, name: str) -> list[dict]:
    listed = get_json(cluster, "-n", namespace, "events", "--field-selector",
                      f"type=Warning,involvedObject.kind=MyDatabase,involvedObject.name={name}")
    return listed.get("items") or []


def restarts(cluster, namespace: str, pod: str) -> int:
    statuses = (get_json(cluster, "-n", namespace, "pod", pod).get("status") or {})
    found = (statuses.get("initContainerStatuses") or []) + (statuses.get("containerStatuses") or [])
    return max((c.get("restartCount", 0) for c in found), default=0)


def test_a_database_that_cannot_run_says_why_in_status_with_one_warning(cluster, real_operator, namespace):
    """Four databases at once, each refused by someone else. The platform's refusal comes before anything is
    made (no StatefulSet, no pod); the others name the pod and the refusal's own words. The crashing server is
    watched through two of the kubelet's back-offs (Error, CrashLoopBackOff, Error...): its words stay the
    same, so there is still one Warning."""
    for name, (fields, *_) in CASES.items():
        create(cluster, namespace, name, fields)
    for name, (_, phase, reason, words) in CASES.items():
        told = wait_for(f"mydb/{name} {phase} with its reason",
                        lambda: (lambda c: c if c.get("phase") == phase and words in c.get("message", "") else None)(
                            ready_condition(cluster, namespace, name)), timeout=180)
        assert (told["status"], told["reason"]) == ("False", reason), told
    assert get_json(cluster, "-n", namespace, "statefulset", "no-major") == {}
    assert "library/postgres:15.9" in ready_condition(cluster, namespace, "no-image")["message"]

    wait_for("two restarts of the crashing server", lambda: restarts(cluster, namespace, "bad-parameter-0") >= 2,
             timeout=120)
    assert 'FATAL:  configuration file' in ready_condition(cluster, namespace, "bad-parameter")["message"]
    for name, (_, _, reason, words) in CASES.items():
        told = [e for e in warnings(cluster, namespace, name) if e["reason"] == reason]
        said = [(e.get("eventTime") or e.get("firstTimestamp"), e.get("count", 1), e["message"]) for e in told]
        own = [e for e in told if words in e["message"]]
        assert len(own) == 1 and own[0].get("count", 1) == 1, (name, said)
        # Other workers' pods can fill the real node's CPU for a moment: a pod told so first is another refusal,
        # with its own Warning. Nothing else may be said.
        assert all(" cannot be scheduled: Insufficient " in e["message"] for e in told if e not in own), (name, said)
