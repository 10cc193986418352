"""Deletion: forget the release; keep the data and its Secret unless deletionPolicy is Delete.

A release whose objects are owned by the MyDatabase (the StatefulSet in the cache says so) needs no Helm
run: deleting its stored revisions is one request, and the garbage collector removes the objects once
the MyDatabase is gone. Older releases, or a chart that does not own its objects, get helm uninstall."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from .. import names
from ..cluster.api import ApiPort
from ..cluster.failures import API_FAILURES, failure_detail
from ..helm.errors import HelmError
from ..model.secrets import made_by_the_operator
from ..policy.deletion import deletion_plan, owned_by
from ..status.phases import DELETING
from .daemon import CANCELLATION_SECONDS
from .memo import OperatorMemo

log = logging.getLogger(__name__)
# How long deletion waits for the daemon to leave: its cancellation, and room for Helm to exit.
DAEMON_EXIT_SECONDS = 3 * CANCELLATION_SECONDS


@kopf.on.delete(names.GROUP, names.VERSION, names.PLURAL)
async def delete_database(
    spec: kopf.Spec, meta: kopf.Meta, namespace: str | None, name: str, memo: OperatorMemo, **_: Any
) -> None:
    """Forget the release; keep the data and its Secret unless deletionPolicy is Delete."""
    assert namespace is not None  # MyDatabase is a namespaced resource
    memo.runtime.rollouts.leave((namespace, name))
    # kopf stops the daemon while this handler runs: a Helm run it is in would write its release
    # record after the records are deleted below, and that record would outlive the database.
    try:
        async with asyncio.timeout(DAEMON_EXIT_SECONDS):
            await memo.wakeups.wait_gone((namespace, name))
    except TimeoutError:
        log.warning("%s/%s: a reconcile still runs after %.0fs; deleting anyway", namespace, name, DAEMON_EXIT_SECONDS)
    api = memo.runtime.api
    plan = deletion_plan(dict(spec))
    observed = memo.runtime.children.observation(namespace, name)
    collected = owned_by(observed.statefulset if observed else None, meta.get("uid") or "")
    claims: list[str] = []
    try:
        await api.patch_status(namespace, name, {"phase": DELETING, "ready": False})
        if collected:
            await api.delete_release_records(namespace, name)
        else:
            await memo.runtime.helm.uninstall(namespace, name)
        if plan.delete_claims:
            if collected:
                # Left to the garbage collector, the StatefulSet lives until the MyDatabase is gone and
                # re-creates a deleted claim for any pod it re-creates: that claim would outlive the database.
                await api.delete_statefulset(namespace, name)
            claims = await api.delete_claims(namespace, name)
            # The record of the primary goes with the data it points into; kept beside retained claims, it
            # tells the same database made again which of them holds the newest data.
            await api.delete_record(namespace, name)
        secrets: list[str] = []
        if plan.delete_secret:  # a Secret the user supplied is theirs to delete
            secrets.append(names.credentials_secret_name(name))
        if plan.delete_certificates:  # the operator's own, whether or not spec.tls.secretName names another
            secrets += [names.ca_secret_name(name), names.server_tls_secret_name(name)]
            secrets.append(names.application_secret_name(name))
        for secret in secrets:
            await delete_own_secret(api, namespace, name, secret)
    except HelmError as error:
        raise kopf.TemporaryError(f"helm uninstall failed: {error}", delay=10) from None
    except API_FAILURES as error:
        raise kopf.TemporaryError(f"deleting: {failure_detail(error)}", delay=10) from None
    how = "its objects go with it (garbage collector)" if collected else "its release uninstalled"
    if plan.delete_claims:
        secret = "and the operator's Secret" if plan.delete_secret else "(the Secret you supplied is kept)"
        told = f"deleted, {how}, with claims {claims} {secret} (deletionPolicy Delete)"
        log.info("%s/%s: %s", namespace, name, told)
    else:
        log.info(
            "%s/%s: deleted, %s; its claims, Secret and record of the primary are kept (deletionPolicy Retain)",
            namespace,
            name,
            how,
        )


async def delete_own_secret(api: ApiPort, namespace: str, release: str, secret: str) -> None:
    """Delete SECRET when it is the operator's for RELEASE (its labels), as it was read (its uid): a Secret of the
    same name that someone else made stays."""
    found = await api.read_secret(namespace, secret)
    if found is not None and made_by_the_operator(found, release):
        await api.delete_secret(namespace, secret, found["metadata"].get("uid"))
