"""Fakes at the operator's boundaries only: the API server and the helm executable (conftest.py's fixtures).

`api` replaces the calls of cluster/reads.py and cluster/writes.py (each a
request to the API server) with a small in-memory API: objects in dicts, every
write recorded. `helm` stands in for Helm (a subprocess). Everything between
them, the operator's own decisions and steps, runs for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster import reads
from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.desired.platform import Platform
from mydb_operator.helm.errors import HelmError
from mydb_operator.helm.releases import AppliedRelease
from mydb_operator.model.observation import Observation
from mydb_operator.reconcile.runtime import Runtime

Key = tuple[str, str]  # (namespace, name)
T = TypeVar("T")


class FakeApi:
    """What the API server holds for the reads the operator makes, and the writes it received."""

    def __init__(self) -> None:
        self.storage_classes: dict[str, dict[str, Any]] = {}
        self.secrets: dict[Key, dict[str, Any]] = {}
        self.claims: dict[Key, dict[str, Any]] = {}
        self.statefulsets: dict[Key, dict[str, Any]] = {}
        self.jobs: dict[Key, dict[str, Any]] = {}
        self.cronjobs: dict[Key, dict[str, Any]] = {}
        self.observations: dict[Key, Observation] = {}  # what a full read of one database answers
        self.grown: list[tuple[str, str, str]] = []  # (namespace, claim, size)
        self.orphaned: list[Key] = []
        self.labels: list[tuple[str, str, str, str]] = []
        self.orphaning_times_out = False  # the old StatefulSet never finishes terminating
        self.refusal: ApiException | None = None  # what the API server answers a claim's growth

    # reads
    async def observation(self, namespace: str, release: str) -> Observation:
        return self.observations.get((namespace, release), Observation())

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.secrets.get((namespace, name))

    async def storage_class(self, name: str) -> dict[str, Any] | None:
        return self.storage_classes.get(name)

    async def default_storage_class(self) -> dict[str, Any] | None:
        return next(
            (
                c
                for c in self.storage_classes.values()
                if (c["metadata"].get("annotations") or {}).get(reads.DEFAULT_CLASS_ANNOTATION) == "true"
            ),
            None,
        )

    async def read_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.statefulsets.get((namespace, name))

    async def read_cronjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.cronjobs.get((namespace, name))

    async def claim_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.claims

    # writes
    async def create_secret_once(self, body: dict[str, Any]) -> bool:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if key in self.secrets:
            return False  # 409: never overwritten
        self.secrets[key] = body
        return True

    async def create_job_once(self, body: dict[str, Any]) -> bool:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if key in self.jobs:
            return False
        self.jobs[key] = body
        return True

    async def grow_claim(self, namespace: str, name: str, size: str) -> None:
        if self.refusal is not None:
            raise self.refusal
        self.grown.append((namespace, name, size))

    async def orphan_statefulset(self, namespace: str, name: str) -> None:
        if self.orphaning_times_out:
            raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after 60s")
        self.orphaned.append((namespace, name))
        self.statefulsets.pop((namespace, name), None)

    async def label_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        self.labels.append((namespace, name, key, value))

    def storage_class_object(self, name: str, *, expandable: bool, default: bool = False) -> None:
        annotations = {reads.DEFAULT_CLASS_ANNOTATION: "true"} if default else {}
        self.storage_classes[name] = {
            "metadata": {"name": name, "annotations": annotations},
            "allowVolumeExpansion": expandable,
        }


class FakeHelm:
    """helm upgrade --install, recorded; `failure` makes every run fail with Helm's message."""

    max_parallel = 2

    def __init__(self, digest: str = "0123456789abcdef") -> None:
        self.digest = digest
        self.upgrades: list[tuple[str, str, dict[str, Any]]] = []
        self.failure: str | None = None

    async def upgrade(self, namespace: str, release: str, values: dict[str, Any]) -> AppliedRelease:
        if self.failure is not None:
            raise HelmError(self.failure)
        self.upgrades.append((namespace, release, values))
        return AppliedRelease(name=release, revision=len(self.upgrades), status="deployed", chart="mydatabase-0.1.0")


def make_runtime(helm: FakeHelm, platform: Platform | None = None) -> Runtime:
    return Runtime(helm=helm, children=ChildStore(on_change=lambda *_: None),  # type: ignore[arg-type]
                   platform=platform or Platform())


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


# ---------------------------------------------------------------- the objects the chart renders, as the API shows them

def statefulset(release: str = "db", *, version: str = "15.2", replicas: int = 2,
                size: str = "1Gi") -> dict[str, Any]:
    return {
        "metadata": {"name": release, "namespace": "ns", "resourceVersion": "7"},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": names.POSTGRES_CONTAINER, "image": f"postgres:{version}"}]}},
            "volumeClaimTemplates": [
                {"metadata": {"name": names.DATA_CLAIM_TEMPLATE},
                 "spec": {"resources": {"requests": {"storage": size}}}},
            ],
        },
        "status": {"observedGeneration": 1, "updatedReplicas": replicas, "currentRevision": "r1",
                   "updateRevision": "r1"},
    }


def data_claim(ordinal: int, release: str = "db", *, size: str = "1Gi",
               storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": f"{names.data_claim_prefix(release)}{ordinal}", "namespace": "ns"}, "spec": spec,
            "status": {"capacity": {"storage": size}}}


def running(release: str = "db", **facts: Any) -> Observation:
    """A database whose StatefulSet and Services are all there (nothing drifted)."""
    claims = facts.pop("claims", [])
    return Observation(statefulset=statefulset(release, **facts), services=sorted(names.release_services(release)),
                       claims=claims)
