"""Leader election before kopf starts: stand by until this instance holds the Lease."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cluster.clients import Connection
    from ..leadership.lease import LeaderLease


def lead(args: argparse.Namespace, namespaces: Sequence[str], api: Connection) -> LeaderLease:
    """Block until this instance holds the Lease (answering /healthz meanwhile); exit when it loses it.

    The Lease gets a connection of its own from API, the port's adapter (memo.api).

    Raises ScopeConflict when another live instance, under another Lease, manages
    namespaces this one would manage too."""
    from ..cluster.clients import load_config
    from ..leadership import lease as election
    from ..leadership.conflicts import ScopeConflict
    from ..leadership.identity import default_identity, default_namespace
    from ..leadership.scopes import scope_of
    from ..leadership.standby_health import standby_health

    load_config()
    lease = election.LeaderLease(
        args.leader_lease_namespace or default_namespace(),
        args.leader_lease_name,
        default_identity(),
        api.dedicated(),
        duration=args.leader_lease_seconds,
        scope=scope_of(namespaces),
    )
    with standby_health(args.health_port, lease.standby_status):
        lease.refuse_overlap()  # a second instance fails at once instead of standing by for the wrong Lease
        lease.acquire()
        try:
            lease.refuse_overlap()  # two that started at the same moment: each now sees the other's Lease
        except ScopeConflict:
            lease.release()
            raise
    lease.keep(on_lost=lambda: os._exit(1))  # a standby takes over; the Deployment restarts this one
    return lease
