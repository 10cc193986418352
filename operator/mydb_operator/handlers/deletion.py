"""Deletion: uninstall the release; keep the data and its Secret unless deletionPolicy is Delete."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from .. import names
from ..cluster import writes
from ..cluster.failures import API_FAILURES
from ..helm.errors import HelmError
from ..policy.deletion import deletion_plan
from ..status.phases import DELETING
from .memo import OperatorMemo

log = logging.getLogger(__name__)


@kopf.on.delete(names.GROUP, names.VERSION, names.PLURAL)
async def delete_database(spec: kopf.Spec, namespace: str | None, name: str, memo: OperatorMemo, **_: Any) -> None:
    """Uninstall the release; keep the data and its Secret unless deletionPolicy is Delete."""
    assert namespace is not None  # MyDatabase is a namespaced resource
    plan = deletion_plan(dict(spec))
    claims: list[str] = []
    try:
        await writes.patch_status(namespace, name, {"phase": DELETING, "ready": False})
        await memo.runtime.helm.uninstall(namespace, name)
        if plan.delete_claims:
            claims = await writes.delete_claims(namespace, name)
        if plan.delete_secret:  # a Secret the user supplied is theirs to delete
            await writes.delete_secret(namespace, names.credentials_secret_name(name))
    except HelmError as error:
        raise kopf.TemporaryError(f"helm uninstall failed: {error}", delay=10) from None
    except API_FAILURES as error:
        raise kopf.TemporaryError(f"deleting: {getattr(error, 'reason', None) or error}", delay=10) from None
    if plan.delete_claims:
        log.info(
            "%s/%s: deleted, with claims %s and the operator's Secret (deletionPolicy Delete)", namespace, name, claims
        )
    else:
        log.info("%s/%s: deleted; its claims and Secret are kept (deletionPolicy Retain)", namespace, name)
