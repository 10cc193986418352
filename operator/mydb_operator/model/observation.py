"""What the cluster says about one database, as one value (no decisions here).

Two sources give the same Observation: the informers' cache (cluster/child_store.py),
which costs no request, and direct API reads (cluster/reads.py), for the moments
the cache cannot answer (before its first listing) or must not (before acting)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import names

Object = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on every EndpointSlice, naming its Service


@dataclass(frozen=True)
class Observation:
    statefulset: Object | None = None
    pods: list[Object] = field(default_factory=list)
    cronjob: Object | None = None
    jobs: list[Object] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    claims: list[Object] = field(default_factory=list)  # the pods' data claims
    record: Object | None = None  # the ConfigMap recording the primary (model/record.py), if any
    # Service name -> the pods it routes to now (ready endpoints of its EndpointSlices): what a
    # client reaches, which may lag the pods' labels and readiness.
    routes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def name_of(obj: Object) -> str:
    name: str = obj["metadata"]["name"]
    return name


def assemble(
    release: str,
    *,
    statefulsets: Iterable[Object],
    pods: Iterable[Object],
    cronjobs: Iterable[Object],
    jobs: Iterable[Object],
    services: Iterable[Object],
    claims: Iterable[Object],
    configmaps: Iterable[Object] = (),
    endpointslices: Iterable[Object] = (),
) -> Observation:
    """One database's Observation from objects that carry its selector labels."""
    return Observation(
        statefulset=next((s for s in statefulsets if name_of(s) == release), None),
        pods=sorted((p for p in pods if names.is_database_pod(name_of(p), release)), key=name_of),
        cronjob=next((c for c in cronjobs if name_of(c) == names.backup_cronjob(release)), None),
        jobs=sorted(jobs, key=name_of),
        services=sorted(name_of(s) for s in services),
        claims=sorted((c for c in claims if name_of(c).startswith(names.data_claim_prefix(release))), key=name_of),
        record=next((c for c in configmaps if name_of(c) == names.primary_record(release)), None),
        routes=routes(endpointslices),
    )


def routes(endpointslices: Iterable[Object]) -> dict[str, tuple[str, ...]]:
    """Service -> the pods its EndpointSlices list as ready, sorted."""
    found: dict[str, set[str]] = {}
    for endpoint_slice in endpointslices:
        service = (endpoint_slice["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if not service:
            continue
        pods = found.setdefault(service, set())
        for endpoint in endpoint_slice.get("endpoints") or []:
            target = (endpoint.get("targetRef") or {}).get("name")
            if target and (endpoint.get("conditions") or {}).get("ready"):
                pods.add(target)
    return {service: tuple(sorted(pods)) for service, pods in found.items()}
