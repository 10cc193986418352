"""A database whose namespace is being deleted: let it go.

kopf stops watching a namespace once it is being deleted, with an operator scoped by
namespace patterns (`-n 'team-*'`): the namespace controller's first conditions, all
False, read to kopf as "deleted" (kopf 1.45, observation.revise_namespaces). It then
never runs the deletion handler of the databases in it, never stops their daemons, and
the namespace stays Terminating for ever, held by the operator's finalizer.

The daemon notices: in a namespace being deleted every write is refused, so a pass
fails. It then asks the API, and releases the finalizer of a database marked for
deletion in a namespace being deleted. The deletion handler's steps are not needed:
the namespace controller deletes everything in the namespace, claims and Secrets
included, whatever spec.deletionPolicy says."""

from __future__ import annotations

import logging

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail
from ..policy.deletion import finalizers_without, marked_for_deletion
from .runtime import Runtime

log = logging.getLogger(__name__)


async def let_go_in_deleted_namespace(runtime: Runtime, namespace: str, name: str) -> bool:
    """True when the database is gone, or marked for deletion in a namespace being deleted (its finalizer is
    released now): its daemon has nothing left to do. Two reads, only after a failed pass."""
    try:
        database = await runtime.api.read_database(namespace, name)
        if database is None:
            return True
        if not marked_for_deletion(database) or not await runtime.api.namespace_terminating(namespace):
            return False
        remaining = finalizers_without(database, names.FINALIZER)
        if remaining is not None:
            version = database["metadata"]["resourceVersion"]
            await runtime.api.release_finalizer(namespace, name, version, remaining)
    except API_FAILURES as error:
        log.debug(
            "%s/%s: could not tell whether its namespace is being deleted: %s", namespace, name, failure_detail(error)
        )
        return False
    log.info(
        "%s/%s: the namespace is being deleted, and everything in it with it: the finalizer is released",
        namespace,
        name,
    )
    return True
