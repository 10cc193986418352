"""A record of the primary that went missing: written again from what the servers say. Pure.

Without the ConfigMap, ordinal 0 would be taken for the primary (a database whose primary never moved has no
record), and a replica there would be promoted at once, without failoverDelay or the lag check. A cleanup
script, a GitOps prune or a restored namespace must move nothing."""

from __future__ import annotations

from .. import names
from ..model.instances import InstanceFacts
from ..model.record import REBUILT, PrimaryRecord
from ..model.timestamps import rfc3339
from .members import Members


def rebuilt_record(members: Members) -> PrimaryRecord | None:
    """With no record, ordinal 0 would be taken for the primary. Once the database has served, the primary is
    what the servers say instead: the one answering as a primary (the highest timeline, then the most WAL),
    else the last pod the status confirmed. None when that is ordinal 0 (no record means it) or unknown."""
    acting = [f for f in members.probes.values() if isinstance(f, InstanceFacts) and not f.in_recovery]
    if acting:
        primary = max(acting, key=lambda f: (f.timeline or 0, f.wal_lsn, f.pod)).pod
    elif members.last_primary:
        primary = members.last_primary
    else:
        return None
    if primary == names.pod_name(members.release, 0):
        return None
    return PrimaryRecord(primary=primary, reason=REBUILT, decided_at=rfc3339(members.now))
