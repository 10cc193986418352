"""What a deletion removes besides the release (by spec.deletionPolicy, never the user's own Secret), and
whether the garbage collector removes the release's objects. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.errors import SpecError
from ..model.spec import DELETION_DELETE, parse_spec


@dataclass(frozen=True)
class DeletionPlan:
    delete_claims: bool  # the data and backup claims go too (deletionPolicy Delete)
    delete_secret: bool  # and the operator's own credentials Secret with them
    # and the operator's CA and server certificate (kept with Retain: a database made again over the kept
    # claims keeps the CA its clients trust)
    delete_certificates: bool = False


def owned_by(obj: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether `obj` carries an ownerReference to `uid`: then the garbage collector removes it (and every
    object of the same release, rendered by the same chart) once the MyDatabase is gone, and deletion
    needs no helm uninstall."""
    if obj is None or not uid:
        return False
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def deletion_plan(spec: Mapping[str, Any]) -> DeletionPlan:
    """Retain (the default) keeps claims and Secret; Delete removes both, but a Secret the user supplied is
    theirs to delete. A spec that cannot be parsed keeps everything: when in doubt, keep the data."""
    try:
        parsed = parse_spec(spec)
    except SpecError:
        return DeletionPlan(delete_claims=False, delete_secret=False)
    delete = parsed.deletion_policy == DELETION_DELETE
    return DeletionPlan(
        delete_claims=delete, delete_secret=delete and not parsed.existing_secret, delete_certificates=delete
    )


def marked_for_deletion(database: Mapping[str, Any]) -> bool:
    return bool(database.get("metadata", {}).get("deletionTimestamp"))


def finalizers_without(database: Mapping[str, Any], finalizer: str) -> list[str] | None:
    """The database's finalizers once `finalizer` is released; None when it holds no such finalizer."""
    finalizers = list(database.get("metadata", {}).get("finalizers") or [])
    if finalizer not in finalizers:
        return None
    return [f for f in finalizers if f != finalizer]
