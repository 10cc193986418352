"""Cached objects kept small: only the parts a reconcile reads, their strings shared. Pure."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .. import names
from ..model.pods import TLS_VOLUME, tls_secret

Object = dict[str, Any]

# Parts no reconcile reads (status, the policies and drift look at pod and Job status and
# Service names): not kept, to keep memory flat at a thousand databases. A fresh API read
# before acting (an on-demand backup's Job template, Helm) has whole objects anyway.
UNREAD = {"jobs": ("spec",), "services": ("spec", "status")}


def tls_volumes(pod_spec: Object) -> list[Object]:
    """Of a pod spec's volumes, only the certificate's, and only its Secret's name (model/pods.tls_secret):
    the operator connects to such a pod over TLS, and restarts the primary first when the Secret changes."""
    secret = tls_secret(pod_spec)
    return [{"name": TLS_VOLUME, "secret": {"secretName": secret}}] if secret else []


def pod_spec(spec: Object) -> Object:
    """What reconciles read of a pod's spec: whether it serves TLS, and its node (whose kubelet measures
    its data volume)."""
    slim: Object = {"volumes": tls_volumes(spec)}
    if spec.get("nodeName"):
        slim["nodeName"] = spec["nodeName"]
    return slim


def statefulset_spec(spec: Object) -> Object:
    """What reconciles read of a StatefulSet's spec: its replicas, its claim templates (their
    size), its containers' images (the running version), who restarts the pods and how they
    start; the rest of the pod template is most of the object and nothing reads it."""
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    containers = [{"name": c.get("name"), "image": c.get("image")} for c in pod_spec.get("containers") or []]
    return {
        "replicas": spec.get("replicas"),
        "volumeClaimTemplates": spec.get("volumeClaimTemplates") or [],
        "template": {"spec": {"containers": containers, "volumes": tls_volumes(pod_spec)}},
        "updateStrategy": {"type": (spec.get("updateStrategy") or {}).get("type")},
        "podManagementPolicy": spec.get("podManagementPolicy"),
    }


def cronjob_spec(spec: Object) -> Object:
    """What reconciles read of the backup CronJob's spec: its schedule (drift)."""
    return {"schedule": spec.get("schedule")}


def configmap(obj: Object) -> Object:
    """The operator's record of the primary whole; the chart's scripts without their text."""
    if (obj["metadata"].get("labels") or {}).get(names.RECORD_LABEL):
        return obj
    return {k: v for k, v in obj.items() if k not in ("data", "binaryData")}


def endpoint_slice(obj: Object) -> Object:
    """Which pods it routes to, and whether each is ready: nothing else of it is read."""
    endpoints = [
        {
            "targetRef": {"name": (e.get("targetRef") or {}).get("name")},
            "conditions": {"ready": (e.get("conditions") or {}).get("ready")},
        }
        for e in obj.get("endpoints") or []
    ]
    return {"metadata": obj["metadata"], "endpoints": endpoints}


# Kinds whose cached copy keeps only a few of its parts.
PARTS_READ: dict[str, Callable[[Object], Object]] = {"configmaps": configmap, "endpointslices": endpoint_slice}

# managedFields are the largest part of a server-side applied object; no reconcile reads a
# child's annotations (Helm's release annotations, pod annotations).
METADATA_UNREAD = ("managedFields", "annotations")
SPEC_READ: dict[str, Callable[[Object], Object]] = {
    "statefulsets": statefulset_spec,
    "cronjobs": cronjob_spec,
    "pods": pod_spec,
}


def shared_strings(value: Any) -> Any:
    """The same data with its keys and short strings interned: thousands of cached objects
    then share one copy of "metadata", "Ready", "True" ... instead of one each (half the memory)."""
    if isinstance(value, dict):
        return {sys.intern(k): shared_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared_strings(v) for v in value]
    if isinstance(value, str) and len(value) <= 64:
        return sys.intern(value)
    return value


def slim(kind: str, obj: Object) -> Object:
    """The object as cached: without the unread metadata, the kind's UNREAD parts and the
    unread part of its spec, its strings shared."""
    kept = {k: v for k, v in obj.items() if k not in UNREAD.get(kind, ())}
    if kind in PARTS_READ:
        kept = PARTS_READ[kind](kept)
    kept["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in METADATA_UNREAD}
    if kind in SPEC_READ and "spec" in obj:
        kept["spec"] = SPEC_READ[kind](obj["spec"])
    slimmed: Object = shared_strings(kept)
    return slimmed
