"""Role labels on the pods: the read-write and read-only Services select on them."""

from __future__ import annotations

import logging
from typing import Any

from .. import names
from ..cluster import writes
from ..cluster.failures import API_FAILURES, failure_detail
from ..policy.roles import relabels

log = logging.getLogger(__name__)


async def label_roles(namespace: str, pods: list[dict[str, Any]]) -> bool:
    """Label each pod primary or replica; the read-write and read-only Services select on it.
    False when a label could not be set: the pass still stores what it did (Helm's revision among
    it, so the next pass does not run Helm again) and the daemon retries soon."""
    labelled = True
    for pod, role in relabels(pods):
        try:
            await writes.label_pod(namespace, pod, names.ROLE_LABEL, role)
        except API_FAILURES as error:
            log.warning("%s/%s: cannot label it %s: %s", namespace, pod, role, failure_detail(error))
            labelled = False
    return labelled
