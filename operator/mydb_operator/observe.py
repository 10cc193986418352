"""What the cluster says about one database (no decisions here).

Two sources give the same Observation: the informers' cache (children.py),
which costs no request, and direct API reads, for the moments the cache
cannot answer (before its first listing) or must not (before acting)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from . import api, clients
from .kube import threaded, tolerating

Object = dict[str, Any]


@dataclass(frozen=True)
class Observation:
    statefulset: Object | None = None
    pods: list[Object] = field(default_factory=list)
    cronjob: Object | None = None
    jobs: list[Object] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    claims: list[Object] = field(default_factory=list)  # the pods' data claims


def _name(obj: Object) -> str:
    return obj["metadata"]["name"]


def assemble(release: str, *, statefulsets: Iterable[Object], pods: Iterable[Object], cronjobs: Iterable[Object],
             jobs: Iterable[Object], services: Iterable[Object], claims: Iterable[Object]) -> Observation:
    """One database's Observation from objects that carry its selector labels."""
    return Observation(
        statefulset=next((s for s in statefulsets if _name(s) == release), None),
        pods=sorted((p for p in pods if _name(p).rsplit("-", 1)[0] == release), key=_name),
        cronjob=next((c for c in cronjobs if _name(c) == f"{release}-backup"), None),
        jobs=sorted(jobs, key=_name),
        services=sorted(_name(s) for s in services),
        claims=sorted((c for c in claims if _name(c).startswith(f"data-{release}-")), key=_name),
    )


@threaded
def read(release: str, namespace: str) -> Observation:
    """Straight from the API: four label-selected lists and two reads by name."""
    core, apps, batch = clients.core(), clients.apps(), clients.batch()
    selector = api.label_selector(api.selector_labels(release))

    def listed(call) -> list[Object]:
        return clients.raw(call, namespace, label_selector=selector)["items"]

    def by_name(read_call, name: str) -> list[Object]:
        with tolerating(404):
            return [clients.raw(read_call, name, namespace)]
        return []
    return assemble(
        release, pods=listed(core.list_namespaced_pod), claims=listed(core.list_namespaced_persistent_volume_claim),
        statefulsets=by_name(apps.read_namespaced_stateful_set, release),
        cronjobs=by_name(batch.read_namespaced_cron_job, f"{release}-backup"),
        jobs=listed(batch.list_namespaced_job), services=listed(core.list_namespaced_service),
    )
