"""Facts read from an observed StatefulSet: its claim size, its version, its pods' revisions. Pure."""

from __future__ import annotations

from typing import Any

from .. import names
from .versions import VERSION_PATTERN

Object = dict[str, Any]
REVISION_LABEL = "controller-revision-hash"  # the StatefulSet revision a pod was made from


def claim_template_size(statefulset: Object | None) -> str | None:
    """The storage request in the StatefulSet's `data` claim template (immutable once created)."""
    for template in ((statefulset or {}).get("spec") or {}).get("volumeClaimTemplates") or []:
        if template["metadata"]["name"] == names.DATA_CLAIM_TEMPLATE:
            size: str = template["spec"]["resources"]["requests"]["storage"]
            return size
    return None


def image_tag(reference: str) -> str | None:
    """The tag of an image reference: `registry:5000/repo/postgres:15.2@sha256:…` is 15.2. None without one
    (a reference by digest alone). The digest goes first; a `:` before the last `/` is a registry's port."""
    named = reference.split("@", 1)[0]
    path, colon, tag = named.rpartition(":")
    return tag if colon and "/" not in tag and path else None


def postgres_image(statefulset: Object | None) -> str | None:
    """The image reference of the StatefulSet's postgres container, as deployed."""
    containers = (((statefulset or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", [])
    return next((c["image"] for c in containers if c["name"] == names.POSTGRES_CONTAINER), None)


def running_version(statefulset: Object | None) -> str | None:
    """The PostgreSQL version the StatefulSet runs: its postgres image's tag, when it reads MAJOR.MINOR."""
    image = postgres_image(statefulset)
    tag = image_tag(image) if image else None
    return tag if tag is not None and VERSION_PATTERN.match(tag) else None


def pending_restart(statefulset: Object | None, pods: list[Object]) -> list[str]:
    """Pods not yet on the StatefulSet's current template revision."""
    revision = ((statefulset or {}).get("status") or {}).get("updateRevision")
    if not revision:
        return []
    return sorted(
        p["metadata"]["name"] for p in pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision
    )


def update_strategy(statefulset: Object | None) -> str | None:
    """RollingUpdate (the controller rolls the pods) or OnDelete (the operator restarts them)."""
    strategy = (((statefulset or {}).get("spec") or {}).get("updateStrategy") or {}).get("type")
    return strategy if isinstance(strategy, str) else None


def update_revision(statefulset: Object | None) -> str | None:
    revision = ((statefulset or {}).get("status") or {}).get("updateRevision")
    return revision if isinstance(revision, str) else None


def pod_management(statefulset: Object | None) -> str | None:
    policy = ((statefulset or {}).get("spec") or {}).get("podManagementPolicy")
    return policy if isinstance(policy, str) else None
