"""Leader election before kopf starts: stand by until this instance holds the Lease."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import Config

if TYPE_CHECKING:
    from ..cluster.clients import Connection
    from ..leadership.lease import LeaderLease


def lead(config: Config, api: Connection, before_exit: Callable[[], None] = lambda: None) -> LeaderLease:
    """Block until this instance holds the Lease (answering /healthz meanwhile); exit when it loses it,
    at once, after `before_exit` (which removes what the process leaves in /tmp).

    The Lease gets a connection of its own from API, the port's adapter (memo.api).

    Raises ScopeConflict when another live instance, under another Lease, manages
    namespaces this one would manage too."""
    from ..cluster.clients import load_config
    from ..leadership import lease as election
    from ..leadership.conflicts import ScopeConflict
    from ..leadership.identity import default_namespace
    from ..leadership.scopes import scope_of
    from ..leadership.standby_health import standby_health

    load_config()
    lease = election.LeaderLease(
        default_namespace(config.leader_lease_namespace),
        config.leader_lease_name,
        config.identity,
        api.dedicated(),
        duration=config.leader_lease_seconds,
        scope=scope_of(config.namespaces),
    )
    with standby_health(config.health_port, lease.standby_status):
        lease.refuse_overlap()  # a second instance fails at once instead of standing by for the wrong Lease
        lease.acquire()
        try:
            lease.refuse_overlap()  # two that started at the same moment: each now sees the other's Lease
        except ScopeConflict:
            lease.release()
            raise

    def stop() -> None:
        before_exit()
        os._exit(1)  # a standby takes over; the Deployment restarts this one

    lease.keep(on_lost=stop)
    return lease
