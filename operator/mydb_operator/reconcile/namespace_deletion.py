"""Databases whose namespace is being deleted: let them go.

kopf stops watching a namespace once it is being deleted, with an operator scoped by
namespace patterns (`-n 'team-*'`): the namespace controller's first conditions, all
False, read to kopf as "deleted" (kopf 1.45, observation.revise_namespaces), and a
namespace already being deleted when the operator starts is never watched at all. kopf
then never runs the deletion handler of the databases in it, never stops their
daemons, and the namespace stays Terminating for ever, held by the finalizer.

So the operator lets such a database go itself: its daemon after a failed pass (in a
namespace being deleted every write is refused), and at start-up every database of a
managed namespace being deleted. The deletion handler's steps are not needed: the
namespace controller deletes everything in the namespace, claims and Secrets included,
whatever spec.deletionPolicy says."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .. import names
from ..cluster.api import ApiPort
from ..cluster.failures import API_FAILURES, failure_detail
from ..model.namespaces import managed
from ..policy.deletion import finalizers_without, marked_for_deletion
from ..status.warnings import Event
from .runtime import Runtime

log = logging.getLogger(__name__)


async def let_go_in_deleted_namespace(runtime: Runtime, namespace: str, name: str) -> bool:
    """After a failed pass: True when the database is gone, or marked for deletion in a namespace being deleted
    (its finalizer released now), so its daemon has nothing left to do. One read, two when marked."""
    try:
        database = await runtime.api.read_database(namespace, name)
        if database is None:
            return True
        if not marked_for_deletion(database) or not await runtime.api.namespace_terminating(namespace):
            return False
        await _release(runtime.api, database)
    except API_FAILURES as error:
        log.debug(
            "%s/%s: could not tell whether its namespace is being deleted: %s", namespace, name, failure_detail(error)
        )
        return False
    return True


async def events_to_post(runtime: Runtime, namespace: str, events: list[Event]) -> list[Event]:
    """The pass's Events, or none in a namespace being deleted: the API server refuses them there (kopf tried
    each nine times, an ERROR line a try), and the namespace would take them with it. One read, only when
    there are Events; a read that fails posts them, as before."""
    if not events:
        return events
    try:
        if await runtime.api.namespace_terminating(namespace):
            log.debug("%s: being deleted, %d Event(s) not posted", namespace, len(events))
            return []
    except API_FAILURES:
        pass
    return events


async def let_go_in_deleted_namespaces(api: ApiPort, patterns: Sequence[str]) -> None:
    """At start-up, for an operator scoped by patterns: release the databases marked for deletion in every
    managed namespace being deleted, which kopf will not watch. One list of namespaces, one list per such one."""
    try:
        for namespace in await api.terminating_namespaces():
            if managed(patterns, namespace):
                for database in await api.list_databases(namespace):
                    if marked_for_deletion(database):
                        await _release(api, database)
    except API_FAILURES as error:
        log.warning("could not look for databases in namespaces being deleted: %s", failure_detail(error))


async def _release(api: ApiPort, database: dict[str, Any]) -> None:
    metadata = database["metadata"]
    remaining = finalizers_without(database, names.FINALIZER)
    if remaining is None:
        return
    await api.release_finalizer(metadata["namespace"], metadata["name"], metadata["resourceVersion"], remaining)
    log.info(
        "%s/%s: the namespace is being deleted, and everything in it with it: the finalizer is released",
        metadata["namespace"],
        metadata["name"],
    )
