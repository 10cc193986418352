"""The reconcile steps wired together, without a cluster: the API calls and Helm are fakes.

A first install onto nothing creates the credentials Secret, runs Helm once and
labels the pods; the next pass, with the release's hash in status, runs nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster import reads, writes
from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.watched_kinds import KINDS
from mydb_operator.helm.releases import AppliedRelease
from mydb_operator.model.observation import Observation
from mydb_operator.reconcile import observing
from mydb_operator.reconcile.orchestrator import reconcile
from mydb_operator.reconcile.pacing import RolloutWindow
from mydb_operator.reconcile.runtime import Runtime

BODY = {
    "metadata": {"name": "db", "namespace": "ns", "generation": 1},
    "spec": {"replicas": 2, "version": "15.2", "storage": "1Gi"},
    "status": {},
}


class FakeHelm:
    digest = "0123456789abcdef"
    max_parallel = 2

    def __init__(self) -> None:
        self.upgrades: list[dict[str, Any]] = []

    async def upgrade(self, namespace: str, release: str, values: dict[str, Any]) -> AppliedRelease:
        self.upgrades.append(values)
        return AppliedRelease(name=release, revision=len(self.upgrades), status="deployed", chart="mydatabase-0.1.0")


def pod(ordinal: int) -> dict[str, Any]:
    return {"metadata": {"name": f"db-{ordinal}", "labels": {}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


STATEFULSET = {"metadata": {"name": "db", "generation": 1, "resourceVersion": "7"},
               "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "postgres",
                                                                                "image": "postgres:15.2"}]}}},
               "status": {"observedGeneration": 1, "updatedReplicas": 2, "currentRevision": "r1",
                          "updateRevision": "r1"}}
AFTER_HELM = Observation(statefulset=STATEFULSET, pods=[pod(0), pod(1)],
                         services=sorted(names.release_services("db")))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    made: dict[str, list[Any]] = {"secrets": [], "labels": []}

    async def create_secret_once(body: dict[str, Any]) -> bool:
        made["secrets"].append(body["metadata"]["name"])
        return True

    async def label_pod(namespace: str, name: str, key: str, value: str) -> None:
        made["labels"].append((name, key, value))

    async def read_statefulset(namespace: str, name: str) -> dict[str, Any]:
        return STATEFULSET

    async def observation(namespace: str, release: str) -> Observation:
        return AFTER_HELM

    monkeypatch.setattr(writes, "create_secret_once", create_secret_once)
    monkeypatch.setattr(writes, "label_pod", label_pod)
    monkeypatch.setattr(reads, "read_statefulset", read_statefulset)
    monkeypatch.setattr(reads, "observation", observation)
    monkeypatch.setattr(observing, "CATCH_UP_SECONDS", 0.01)  # the cache never sees Helm's objects here
    return made


def test_a_first_install_then_an_idle_pass(calls: dict[str, list[Any]]) -> None:
    async def scenario() -> None:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)  # synced and empty: a database onto nothing
        helm = FakeHelm()
        runtime = Runtime(helm=helm, children=store)  # type: ignore[arg-type]

        first = await reconcile(BODY, None, runtime)
        assert len(helm.upgrades) == 1 and helm.upgrades[0]["replicas"] == 2
        assert calls["secrets"] == [names.credentials_secret_name("db")]
        assert first.events == [] and first.helm_ran  # the install is told by status alone
        assert calls["labels"] == [("db-0", names.ROLE_LABEL, names.PRIMARY), ("db-1", names.ROLE_LABEL, names.REPLICA)]
        assert first.problem is None
        assert (first.status["phase"], first.status["ready"], first.status["readyReplicas"]) == ("Running", True, 2)
        assert first.status["release"]["revision"] == 1
        assert first.status["lastOperation"]["type"] == "Install"

        for kind, items in (("statefulsets", [STATEFULSET]), ("pods", [pod(0), pod(1)])):
            labelled = [{**o, "metadata": {**o["metadata"], "namespace": "ns",
                                           "labels": names.selector_labels("db")}} for o in items]
            store.replace(kind, None, labelled, listed_at=8)
        services = [{"metadata": {"name": s, "namespace": "ns", "labels": names.selector_labels("db")}}
                    for s in names.release_services("db")]
        store.replace("services", None, services, listed_at=8)
        second = await reconcile({**BODY, "status": first.status}, first.status, runtime)
        assert len(helm.upgrades) == 1  # the hash matches and nothing drifted: no Helm run
        assert second.events == [] and second.status["release"] == first.status["release"]
        assert not second.helm_ran and not second.retry_soon

    asyncio.run(scenario())


def test_a_role_label_refused_after_helm_keeps_the_pass(calls: dict[str, list[Any]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The status is still built (with Helm's revision, so the next pass runs no Helm) and the daemon
    is told to retry soon, instead of the whole pass being lost to the exception."""
    async def label_pod(namespace: str, name: str, key: str, value: str) -> None:
        raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(writes, "label_pod", label_pod)

    async def scenario() -> None:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)
        helm = FakeHelm()
        outcome = await reconcile(BODY, None, Runtime(helm=helm, children=store))  # type: ignore[arg-type]
        assert len(helm.upgrades) == 1 and outcome.helm_ran and outcome.retry_soon
        assert outcome.problem is None and outcome.status["release"]["revision"] == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("pods_ready, holders", [(True, 0), (False, 1)], ids=["ready-leaves", "deploying-holds"])
def test_a_first_install_holds_a_rollout_place_until_its_pods_are_ready(
    calls: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch, pods_ready: bool, holders: int
) -> None:
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    after_helm = AFTER_HELM if pods_ready else Observation(
        statefulset=STATEFULSET, pods=[{**pod(0), "status": not_ready}], services=AFTER_HELM.services)

    async def observation(namespace: str, release: str) -> Observation:
        return after_helm

    monkeypatch.setattr(reads, "observation", observation)

    async def scenario() -> int:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)
        runtime = Runtime(helm=FakeHelm(), children=store, rollouts=RolloutWindow(1))  # type: ignore[arg-type]
        outcome = await reconcile(BODY, None, runtime)
        assert outcome.status["phase"] == ("Running" if pods_ready else "Deploying")
        return runtime.rollouts.holders()

    assert asyncio.run(scenario()) == holders
