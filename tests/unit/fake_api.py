"""Fakes at the operator's boundaries only: the API server and the helm executable (conftest.py's fixtures).

`FakeApi` is the API port (cluster/api.py's ApiPort) on a small in-memory API:
objects in dicts, every write recorded. `FakeHelm` stands in for Helm (a
subprocess). Both reach the code under test through the Runtime
(`make_runtime(helm, api=...)`), as KubernetesApi and Helm do in the operator:
nothing is patched by name. Everything between them, the operator's own
decisions and steps, runs for real.
"""

from __future__ import annotations

import asyncio
import base64
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
    """What the API server holds for the reads the operator makes, and the writes it received.

    Implements cluster/api.py's ApiPort (test_api_port.py checks every call is here, as declared).
    `failing[call]` makes that call raise the given error (a refusal, an unreachable server)."""

    def __init__(self) -> None:
        self.storage_classes: dict[str, dict[str, Any]] = {}
        self.secrets: dict[Key, dict[str, Any]] = {}
        self.claims: dict[Key, dict[str, Any]] = {}
        self.statefulsets: dict[Key, dict[str, Any]] = {}
        self.jobs: dict[Key, dict[str, Any]] = {}
        self.cronjobs: dict[Key, dict[str, Any]] = {}
        self.job_pods_made: dict[Key, list[dict[str, Any]]] = {}  # (namespace, Job) -> its pods
        self.records: dict[Key, dict[str, Any]] = {}  # the records of the primary (ConfigMaps), as written
        self.leases: dict[Key, dict[str, Any]] = {}  # the primary leases, as written
        self.observations: dict[Key, Observation] = {}  # what a full read of one database answers
        self.summaries: dict[str, dict[str, Any]] = {}  # node -> its kubelet's /stats/summary
        self.databases: dict[Key, dict[str, Any]] = {}  # the MyDatabases as the API has them now
        self.terminating: set[str] = set()  # the namespaces being deleted
        self.grown: list[tuple[str, str, str]] = []  # (namespace, claim, size)
        self.orphaned: list[Key] = []
        self.labels: list[tuple[str, str, str, str]] = []
        self.statuses: list[tuple[str, str, dict[str, Any]]] = []  # (namespace, name, merge patch of .status)
        self.writes: list[tuple[Any, ...]] = []  # every write, in order: (call, its arguments ...)
        self.reads: list[tuple[Any, ...]] = []  # every read, in order: (call, its arguments ...)
        self.orphaning_times_out = False  # the old StatefulSet never finishes terminating
        self.refusal: ApiException | None = None  # what the API server answers a claim's growth
        self.failing: dict[str, BaseException] = {}  # call name -> what it raises
        self._versions = 0

    def _call(self, call: str, *args: Any, write: bool = False) -> None:
        if call in self.failing:
            raise self.failing[call]
        (self.writes if write else self.reads).append((call, *args))

    # reads
    async def observation(self, namespace: str, release: str) -> Observation:
        self._call("observation", namespace, release)
        return self.observations.get((namespace, release), Observation())

    async def stats_summary(self, node: str) -> dict[str, Any] | None:
        self._call("stats_summary", node)
        return self.summaries.get(node)

    async def read_database(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_database", namespace, name)
        return self.databases.get((namespace, name))

    async def namespace_terminating(self, namespace: str) -> bool:
        self._call("namespace_terminating", namespace)
        return namespace in self.terminating

    async def terminating_namespaces(self) -> list[str]:
        self._call("terminating_namespaces")
        return sorted(self.terminating)

    async def list_databases(self, namespace: str) -> list[dict[str, Any]]:
        self._call("list_databases", namespace)
        return [body for (where, _), body in self.databases.items() if where == namespace]

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_secret", namespace, name)
        return self.secrets.get((namespace, name))

    async def storage_class(self, name: str) -> dict[str, Any] | None:
        self._call("storage_class", name)
        return self.storage_classes.get(name)

    async def default_storage_class(self) -> dict[str, Any] | None:
        self._call("default_storage_class")
        return next(
            (
                c
                for c in self.storage_classes.values()
                if (c["metadata"].get("annotations") or {}).get(reads.DEFAULT_CLASS_ANNOTATION) == "true"
            ),
            None,
        )

    async def read_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_statefulset", namespace, name)
        return self.statefulsets.get((namespace, name))

    async def read_cronjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_cronjob", namespace, name)
        return self.cronjobs.get((namespace, name))

    async def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        self._call("job_pods", namespace, job)
        return list(self.job_pods_made.get((namespace, job), []))

    async def claim_exists(self, namespace: str, name: str) -> bool:
        self._call("claim_exists", namespace, name)
        return (namespace, name) in self.claims

    # writes
    async def create_secret_once(self, body: dict[str, Any]) -> bool:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self._call("create_secret_once", *key, write=True)
        if key in self.secrets:
            return False  # 409: never overwritten
        self.secrets[key] = body
        return True

    async def write_secret(self, body: dict[str, Any], replacing: dict[str, Any] | None = None) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self._call("write_secret", *key, write=True)
        if replacing is None and key in self.secrets:
            raise RuntimeError(f"409: Secret {key} exists")  # the API refuses a create over an existing one
        # As the API server stores it: stringData folded into base64 data.
        data = {k: base64.b64encode(v.encode()).decode() for k, v in (body.get("stringData") or {}).items()}
        stored = {k: v for k, v in body.items() if k != "stringData"}
        self.secrets[key] = {**stored, "data": {**(body.get("data") or {}), **data}}

    async def update_secret_data(self, secret: dict[str, Any], changes: dict[str, str | None]) -> None:
        namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
        self._call("update_secret_data", namespace, name, changes, write=True)
        data = self.secrets[(namespace, name)].setdefault("data", {})
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = base64.b64encode(value.encode()).decode()

    async def create_job_once(self, body: dict[str, Any]) -> bool:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self._call("create_job_once", *key, write=True)
        if key in self.jobs:
            return False
        self.jobs[key] = body
        return True

    async def label_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        self._call("label_pod", namespace, name, key, value, write=True)
        self.labels.append((namespace, name, key, value))

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._call("patch_status", namespace, name, write=True)
        self.statuses.append((namespace, name, status))

    async def grow_claim(self, namespace: str, name: str, size: str) -> None:
        self._call("grow_claim", namespace, name, size, write=True)
        if self.refusal is not None:
            raise self.refusal
        self.grown.append((namespace, name, size))

    async def orphan_statefulset(self, namespace: str, name: str) -> None:
        self._call("orphan_statefulset", namespace, name, write=True)
        if self.orphaning_times_out:
            raise TimeoutError(f"StatefulSet {namespace}/{name} still terminating after 60s")
        self.orphaned.append((namespace, name))
        self.statefulsets.pop((namespace, name), None)

    async def delete_statefulset(self, namespace: str, name: str) -> None:
        self._call("delete_statefulset", namespace, name, write=True)
        self.statefulsets.pop((namespace, name), None)

    async def delete_claims(self, namespace: str, release: str) -> list[str]:
        """The claims the release's selector labels select (as the API's label-selected list would)."""
        self._call("delete_claims", namespace, release, write=True)
        selected = names.selector_labels(release)
        gone = [key for key, claim in self.claims.items() if key[0] == namespace
                and selected.items() <= ((claim.get("metadata") or {}).get("labels") or {}).items()]
        for key in gone:
            del self.claims[key]
        return [name for _, name in gone]

    async def delete_release_records(self, namespace: str, release: str) -> None:
        self._call("delete_release_records", namespace, release, write=True)

    async def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> None:
        self._call("delete_secret", namespace, name, write=True)
        self.secrets.pop((namespace, name), None)

    async def write_record(self, body: dict[str, Any]) -> str:
        """Create, or replace at the resourceVersion it was based on (409 otherwise)."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self._call("write_record", *key, write=True)
        based_on = body["metadata"].get("resourceVersion") or None  # None: a create
        stored = self.records.get(key)
        if based_on != (stored["metadata"]["resourceVersion"] if stored else None):
            raise ApiException(status=409, reason="Conflict")  # (a replace of a deleted record: 404 in truth)
        self._versions += 1
        version = str(self._versions)
        self.records[key] = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        return version

    async def delete_record(self, namespace: str, release: str) -> None:
        self._call("delete_record", namespace, release, write=True)
        self.records.pop((namespace, names.primary_record(release)), None)
        self.leases.pop((namespace, names.primary_record(release)), None)

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_lease", namespace, name)
        return self.leases.get((namespace, name))

    async def write_lease(self, body: dict[str, Any]) -> str:
        """Create, or replace at the resourceVersion it was based on (409 otherwise)."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self._call("write_lease", *key, write=True)
        stored = self.leases.get(key)
        if (body["metadata"].get("resourceVersion") or None) != (stored["metadata"]["resourceVersion"] if stored else None):
            raise ApiException(status=409, reason="Conflict")
        self._versions += 1
        self.leases[key] = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self._versions)}}
        return str(self._versions)

    async def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None) -> None:
        self._call("delete_pod", namespace, name, uid, grace, write=True)

    async def remove_annotation(self, namespace: str, name: str, key: str, value: str) -> None:
        self._call("remove_annotation", namespace, name, key, value, write=True)

    async def release_finalizer(self, namespace: str, name: str, resource_version: str, finalizers: list[str]) -> None:
        self._call("release_finalizer", namespace, name, resource_version, finalizers, write=True)
        database = self.databases.get((namespace, name))
        if database is not None and database["metadata"]["resourceVersion"] == resource_version:
            database["metadata"]["finalizers"] = finalizers

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


def make_runtime(helm: FakeHelm, platform: Platform | None = None, *, api: FakeApi | None = None,
                 children: ChildStore | None = None, **settings: Any) -> Runtime:
    """A Runtime on the fakes. The informers' cache is never filled unless a test fills it: after Helm
    the reconcile reads the API at once (catch_up_seconds 0) unless the test says otherwise."""
    return Runtime(helm=helm,  # type: ignore[arg-type]
                   children=children or ChildStore(on_change=lambda *_: None),
                   api=api or FakeApi(),
                   platform=platform or Platform(),
                   **{"catch_up_seconds": 0.0, **settings})


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
