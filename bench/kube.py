"""The cluster as the benchmark sees it, through the admin client: objects, watches, /metrics, namespaces.

The harness's own requests go as admin (system:masters, the `exempt` FlowSchema),
so they never count as the operator's (see apf.py).
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import kubernetes
from kubernetes.client import V1FlowSchema, V1Namespace
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from . import prom

GROUP, VERSION, PLURAL, KIND = "myapp.example.com", "v1", "mydatabases", "MyDatabase"
APISERVER_METRICS = ("apiserver_request_total", "apiserver_flowcontrol_dispatched_requests_total")


class Cluster:
    """Admin access to the local control plane in `cluster_dir` (hack/cluster.py's layout)."""

    def __init__(self, cluster_dir: Path):
        self.dir = cluster_dir
        self.kubeconfig = cluster_dir / "admin.kubeconfig"
        self.pki = cluster_dir / "state" / "pki"
        self.api = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        self.api.configuration.connection_pool_maxsize = 32
        self.api.rest_client = kubernetes.client.rest.RESTClientObject(self.api.configuration)
        self.server = self.api.configuration.host
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.apps = kubernetes.client.AppsV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.flow = kubernetes.client.FlowcontrolApiserverV1Api(self.api)
        self._tls = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        self._tls.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))

    # ---------------------------------------------------------------- metrics

    def get_raw(self, path: str, timeout: float = 30) -> str:
        with urllib.request.urlopen(self.server + path, context=self._tls, timeout=timeout) as response:
            body: bytes = response.read()
            return body.decode()

    def apiserver_metrics(self) -> prom.Samples:
        return prom.parse(self.get_raw("/metrics"), APISERVER_METRICS)

    def server_version(self) -> str:
        version: str = json.loads(self.get_raw("/version")).get("gitVersion", "?")
        return version

    def component_pids(self) -> dict[str, int]:
        """The control plane's processes, from hack/cluster.py's pid files."""
        pids = {}
        for path in (self.dir / "state" / "pids").glob("*.pid"):
            with contextlib.suppress(ValueError):
                pids[path.stem] = int(path.read_text())
        return pids

    # ------------------------------------------------------------- namespaces

    def create_namespace(self, name: str) -> None:
        # The client validates a dict into its model (pydantic) before it sends it: the same, done here.
        self.core.create_namespace(
            V1Namespace.model_validate(
                {"metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "mydb-bench"}}}
            )
        )
        # Pods need the namespace's default ServiceAccount, which a controller creates.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_service_account("default", name)
                return
            except ApiException as error:
                if error.status != 404:
                    raise
            time.sleep(0.2)
        raise TimeoutError(f"namespace {name}: no default ServiceAccount after 60s")

    def delete_namespace(self, name: str, timeout: float, progress: Callable[[str], None]) -> bool:
        """Delete a namespace and wait until it is gone; False after `timeout` (then it is left to finish)."""
        try:
            self.core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise
            return True
        started = time.monotonic()
        last = started
        while time.monotonic() - started < timeout:
            try:
                self.core.read_namespace(name)
            except ApiException as error:
                if error.status == 404:
                    return True
                raise
            if time.monotonic() - last >= 10:
                last = time.monotonic()
                progress(f"namespace {name} still terminating ({last - started:.0f}s)")
            time.sleep(1)
        return False

    def strip_finalizers(self, namespace: str) -> int:
        """Remove the finalizer from every MyDatabase (the operator is stopped), so the namespace can go."""
        listed = cast(  # the custom objects API returns the decoded JSON, annotated as object
            dict[str, Any], self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        )
        items = listed["items"]
        for item in items:
            if item["metadata"].get("finalizers"):
                try:
                    self.custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, PLURAL, item["metadata"]["name"], {"metadata": {"finalizers": None}}
                    )
                except ApiException as error:
                    if error.status != 404:
                        raise
        return len(items)

    # ------------------------------------------------------------ flowschemas

    def install_flow_schemas(self, schemas: list[dict[str, Any]]) -> None:
        for schema in schemas:
            try:
                self.flow.create_flow_schema(V1FlowSchema.model_validate(schema))  # as create_namespace
            except ApiException as error:
                if error.status != 409:
                    raise
                self.flow.patch_flow_schema(schema["metadata"]["name"], {"spec": schema["spec"]})

    def remove_flow_schemas(self, label_selector: str) -> None:
        self.flow.delete_collection_flow_schema(label_selector=label_selector)


# ----------------------------------------------------------------- tracking


@dataclass
class Goal:
    predicate: Callable[[str, dict[str, Any]], bool]
    met: dict[str, float] = field(default_factory=dict)  # key -> time.monotonic() when first seen met


class Tracker:
    """The latest object per key of one watched kind, and when each key first met each goal.

    Times are taken when the watch event arrives, so they include the watch's
    delivery delay (milliseconds on a local API server)."""

    def __init__(self, key: Callable[[dict[str, Any]], str | None]):
        self.key = key
        self.latest: dict[str, dict[str, Any]] = {}
        self.deleted: dict[str, float] = {}  # key -> time.monotonic() of its latest DELETED event
        self.goals: dict[str, Goal] = {}
        self.lock = threading.Lock()

    def seen(self, obj: dict[str, Any]) -> None:
        key = self.key(obj)
        if key is None:
            return
        now = time.monotonic()
        with self.lock:
            self.latest[key] = obj
            for goal in self.goals.values():
                if key not in goal.met and goal.predicate(key, obj):
                    goal.met[key] = now

    def gone(self, obj: dict[str, Any]) -> None:
        key = self.key(obj)
        if key is None:
            return
        with self.lock:
            self.latest.pop(key, None)
            self.deleted[key] = time.monotonic()

    def deleted_at(self) -> dict[str, float]:
        with self.lock:
            return dict(self.deleted)

    def add_goal(self, name: str, predicate: Callable[[str, dict[str, Any]], bool]) -> None:
        """Track a goal from now on; objects that already meet it count as met now."""
        now = time.monotonic()
        with self.lock:
            goal = self.goals[name] = Goal(predicate)
            for key, obj in self.latest.items():
                if predicate(key, obj):
                    goal.met[key] = now

    def met(self, name: str) -> dict[str, float]:
        with self.lock:
            return dict(self.goals[name].met)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return dict(self.latest)


class Watch(threading.Thread):
    """List, then watch, one kind in one namespace, feeding a Tracker; relists when the watch expires."""

    def __init__(self, list_call: Callable[..., Any], tracker: Tracker, label_selector: str = ""):
        super().__init__(daemon=True)
        self.list_call, self.tracker, self.selector = list_call, tracker, label_selector
        self.stopping = threading.Event()
        self.synced = threading.Event()
        self.errors = 0

    def run(self) -> None:
        version = None
        while not self.stopping.is_set():
            try:
                if version is None:
                    response = self.list_call(label_selector=self.selector, _preload_content=False)
                    body = json.loads(response.data)
                    for item in body.get("items") or []:
                        self.tracker.seen(item)
                    version = body["metadata"]["resourceVersion"]
                    self.synced.set()
                response = self.list_call(
                    label_selector=self.selector,
                    watch=True,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=30,
                    _preload_content=False,
                )
                try:
                    for line in iter_resp_lines(response):
                        if self.stopping.is_set():
                            break
                        if not line:
                            continue
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            version = None  # 410 Gone: the window moved on; relist
                            break
                        obj = event["object"]
                        version = obj.get("metadata", {}).get("resourceVersion", version)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.tracker.seen(obj)
                        elif event["type"] == "DELETED":
                            self.tracker.gone(obj)
                finally:
                    response.close()
                    response.release_conn()
            except Exception:
                self.errors += 1
                version = None
                time.sleep(1)

    def stop(self) -> None:
        self.stopping.set()


def start_watch(list_call: Callable[..., Any], tracker: Tracker, label_selector: str = "") -> Watch:
    watch = Watch(list_call, tracker, label_selector)
    watch.start()
    if not watch.synced.wait(60):
        raise TimeoutError("a watch did not sync within 60s")
    return watch


# --------------------------------------------------------------- predicates


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}


def cr_revision(obj: dict[str, Any]) -> int:
    return int(((obj.get("status") or {}).get("release") or {}).get("revision") or 0)


def cr_ready(obj: dict[str, Any], min_revision: int = 1) -> bool:
    """Ready=True for the current generation, at helm revision >= min_revision."""
    status = obj.get("status") or {}
    return (
        conditions(obj).get("Ready", {}).get("status") == "True"
        and status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 1)
        and cr_revision(obj) >= min_revision
    )


def first_backup_started(obj: dict[str, Any]) -> bool:
    """A database with the continuous archive (backup set, continuous not false) has started its first base
    backup (status.backup.firstBackupJob, or one already taken): the last step of a new database's work."""
    backup = (obj.get("spec") or {}).get("backup")
    if not backup or backup.get("continuous") is False:
        return True
    recorded = (obj.get("status") or {}).get("backup") or {}
    return bool(recorded.get("firstBackupJob") or recorded.get("lastBaseBackup"))


def cr_hibernated(obj: dict[str, Any]) -> bool:
    """Phase Hibernated for the current generation, at helm revision >= 1."""
    status = obj.get("status") or {}
    return (
        status.get("phase") == "Hibernated"
        and cr_revision(obj) >= 1
        and status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 1)
    )


def helm_release_deployed(obj: dict[str, Any], min_revision: int = 1) -> bool:
    """A Helm release record (configmap driver) in status deployed, at revision >= min_revision."""
    labels = obj["metadata"].get("labels") or {}
    return labels.get("status") == "deployed" and int(labels.get("version") or 0) >= min_revision


def statefulset_ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    want = (obj.get("spec") or {}).get("replicas", 1)
    return bool(
        (status.get("readyReplicas") or 0) >= want
        and status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 1)
    )


def by_name(obj: dict[str, Any]) -> str:
    name: str = obj["metadata"]["name"]
    return name


def by_helm_release(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get("name")


def releases_gone(records: dict[str, str], deleted: dict[str, float]) -> dict[str, float]:
    """{release: when its last record went} for each release all of whose records are deleted.

    records: {record name: release} as they were before the wave; deleted: {record name: when}."""
    pending: set[str] = set()
    gone: dict[str, float] = {}
    for record, release in records.items():
        if record in deleted:
            gone[release] = max(gone.get(release, 0.0), deleted[record])
        else:
            pending.add(release)
    return {release: t for release, t in gone.items() if release not in pending}
