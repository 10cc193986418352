"""Role labels on the pods: the read-write and read-only Services select on them."""

from __future__ import annotations

from typing import Any

from .. import names
from ..cluster import writes
from ..policy.roles import relabels


async def label_roles(namespace: str, pods: list[dict[str, Any]]) -> None:
    """Label each pod primary or replica; the read-write and read-only Services select on it."""
    for pod, role in relabels(pods):
        await writes.label_pod(namespace, pod, names.ROLE_LABEL, role)
