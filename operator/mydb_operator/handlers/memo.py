"""What every handler shares, made once before kopf starts: kopf hands it to each handler as `memo`.

The CLI checks the platform config and the chart, builds this with the Helm and
platform it checked and the API adapter (cluster/api.py), and passes it to
kopf.run(memo=...). kopf gives each resource a shallow copy, so every handler
sees the same Runtime, wake-ups and informers. Nothing here is a module global:
a test builds its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import names
from ..cluster.api import KubernetesApi
from ..cluster.child_store import ChildStore
from ..cluster.informers import ListWatch
from ..config import Config
from ..desired.platform import Platform
from ..helm.releases import Helm
from ..reconcile.pacing import RolloutWindow
from ..reconcile.runtime import Runtime
from .wakeups import Wakeups


@dataclass
class OperatorMemo:
    config: Config
    runtime: Runtime  # Helm, the API, the informers' cache, the platform: what every reconcile shares
    wakeups: Wakeups
    # The API adapter itself (runtime.api is the same object, seen as the port): the informers and
    # the Lease take their connections from it.
    api: KubernetesApi
    informers: list[ListWatch] = field(default_factory=list)  # started by the startup handler, stopped at cleanup

    def close(self) -> None:
        """After kopf stopped: remove what the Helm holds (its temporary plugins folder)."""
        self.runtime.helm.close()


def operator_memo(
    config: Config,
    platform: Platform,
    helm: Helm,
    api: KubernetesApi,
    *,
    owns_children: bool = False,
    pod_management: str = "Parallel",
    chart_keys: frozenset[str] | None = None,
    port: int = names.POSTGRES_PORT,
) -> OperatorMemo:
    """The handlers' shared state around a Helm and platform the start-up check already accepted, and the API."""
    wakeups = Wakeups()
    store = ChildStore(on_change=wakeups.poke)  # each change wakes the database it belongs to
    runtime = Runtime(
        helm=helm,
        children=store,
        api=api,
        platform=platform,
        owns_children=owns_children,
        pod_management=pod_management,
        chart_keys=chart_keys,
        port=port,
        rollouts=RolloutWindow(config.rollout_window),
    )
    return OperatorMemo(config=config, runtime=runtime, wakeups=wakeups, api=api)
