"""What every reconcile shares: Helm, the API, the informers' cache, the platform and the permits to act."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .. import names
from ..cluster.api import ApiPort
from ..cluster.child_store import ChildStore
from ..desired.platform import Platform
from ..helm.releases import Helm
from ..instances.logins import Logins
from .pacing import RolloutWindow
from .volumes import NodeSummaries
from .watches import PrimaryWatches


@dataclass(frozen=True)
class Runtime:
    """What every reconcile shares: Helm, the API, the informers' cache and the platform's customization."""

    helm: Helm
    children: ChildStore
    # The API server's reads and writes (cluster/api.py): KubernetesApi, or a test's fake.
    api: ApiPort
    platform: Platform = field(default_factory=Platform)
    # The chart puts an ownerReference to the MyDatabase on every object but the claims
    # (helm/chart_check.py): the values carry the owner, and deletion leaves the objects to the GC.
    owns_children: bool = False
    pod_management: str = "Parallel"  # the chart's StatefulSet podManagementPolicy (helm/chart_check.py)
    chart_keys: frozenset[str] | None = None  # the chart's top-level values (None: the bundled chart's)
    # The servers' port, as the start-up check's render gave it (helm/chart_check.py, desired/values.postgres_port):
    # status.endpoints, the credentials Secret's URIs and the connections to the servers use it.
    port: int = names.POSTGRES_PORT
    # First installs between Helm and their pods ready, at most so many at once (pacing.py).
    rollouts: RolloutWindow = field(default_factory=lambda: RolloutWindow(0))
    # How long the cache may take to show what Helm applied before the API is read (observing.py).
    catch_up_seconds: float = 3.0
    # Each database's superuser login, read from its Secret once (the servers are asked as it).
    logins: Logins = field(default_factory=Logins)
    # The kubelets' volume figures, each node's read at most every few seconds (volumes.py).
    summaries: NodeSummaries = field(default_factory=NodeSummaries)
    # Each database's primary as the operator last saw it serve, and its failover clock (watches.py).
    watches: PrimaryWatches = field(default_factory=PrimaryWatches)
    # Twice the Helm slots may act at once (see converging.py): the next databases
    # read and prepare while Helm runs for others.
    acting: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "acting", asyncio.Semaphore(2 * self.helm.max_parallel))
