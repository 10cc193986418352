"""The reconcile steps wired together, without a cluster: the API calls and Helm are fakes.

A first install onto nothing creates the credentials Secret and runs Helm once;
the next pass labels the pods; the one after, with the release's hash in status
and the pods labelled, runs nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeApi, make_runtime
from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster.child_store import ChildStore
from mydb_operator.cluster.watched_kinds import KINDS
from mydb_operator.helm.releases import AppliedRelease
from mydb_operator.model.observation import Observation
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


@pytest.fixture(autouse=True)
def after_helm_in_the_api(api: FakeApi) -> None:
    """What the API shows once Helm ran: the StatefulSet, and the database's objects."""
    api.statefulsets[("ns", "db")] = STATEFULSET
    api.observations[("ns", "db")] = AFTER_HELM


def on_fakes(helm: FakeHelm, store: ChildStore, api: FakeApi, **settings: Any) -> Runtime:
    # The cache never sees Helm's objects here: the API is read after a short wait.
    return make_runtime(helm, api=api, children=store, **{"catch_up_seconds": 0.01, **settings})  # type: ignore[arg-type]


def secrets(api: FakeApi) -> list[str]:
    return [name for _, name in api.secrets]


def labels(api: FakeApi) -> list[tuple[str, str, str]]:
    return [(name, key, value) for _, name, key, value in api.labels]


def slices(routes: dict[str, list[str]]) -> list[dict[str, Any]]:
    """EndpointSlices as the API shows them: one per Service, its ready pods."""
    return [{"metadata": {"name": f"{service}-abc", "namespace": "ns",
                          "labels": {**names.selector_labels("db"), "kubernetes.io/service-name": service}},
             "endpoints": [{"targetRef": {"name": p}, "conditions": {"ready": True}} for p in pods]}
            for service, pods in routes.items()]


def cached(store: ChildStore, pods: list[dict[str, Any]], routes: dict[str, list[str]], version: int) -> None:
    """The informers' copy of the database at resourceVersion VERSION: its StatefulSet, pods, Services and
    where they route."""
    services = [{"metadata": {"name": s, "labels": {}}} for s in names.release_services("db")]
    for kind, items in (("statefulsets", [STATEFULSET]), ("pods", pods), ("services", services),
                        ("endpointslices", slices(routes))):
        stored = [{**o, "metadata": {**o["metadata"], "namespace": "ns", "resourceVersion": str(version),
                                     "labels": {**names.selector_labels("db"), **(o["metadata"].get("labels") or {})}}}
                  for o in items]
        store.replace(kind, None, stored, listed_at=version)


def labelled(ordinal: int, role: str) -> dict[str, Any]:
    made = pod(ordinal)
    return {**made, "metadata": {**made["metadata"], "labels": {names.ROLE_LABEL: role}}}


def test_a_first_install_then_labels_then_an_idle_pass(api: FakeApi) -> None:
    """The install runs Helm once and is Deploying until the Services route; the next pass labels the
    primary and the replica (the Services select on the labels) and, with both Services routing to them,
    is Running; an idle pass after that does nothing at all."""
    async def scenario() -> None:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)  # synced and empty: a database onto nothing
        helm = FakeHelm()
        runtime = on_fakes(helm, store, api)

        first = await reconcile(BODY, None, runtime)
        assert len(helm.upgrades) == 1 and helm.upgrades[0]["replicas"] == 2
        assert helm.upgrades[0]["updateStrategy"] == "OnDelete"
        assert secrets(api) == [names.ca_secret_name("db"), names.server_tls_secret_name("db"), names.credentials_secret_name("db")]
        assert first.events == [] and first.helm_ran  # the install is told by status alone
        assert labels(api) == []  # no pod before Helm: they are labelled once they exist
        assert first.problem is None
        assert (first.status["phase"], first.status["ready"], first.status["readyReplicas"]) == ("Deploying", False, 2)
        assert first.status["conditions"][0]["reason"] == "RoutingPending"
        assert first.status["release"]["revision"] == 1
        assert first.status["lastOperation"]["type"] == "Install"

        cached(store, [pod(0), pod(1)], {"db": ["db-0"], "db-ro": ["db-1"]}, 8)
        second = await reconcile({**BODY, "status": first.status}, first.status, runtime)
        assert len(helm.upgrades) == 1  # the hash matches and nothing drifted: no Helm run
        assert labels(api) == [("db-0", names.ROLE_LABEL, names.PRIMARY), ("db-1", names.ROLE_LABEL, names.REPLICA)]
        assert (second.status["phase"], second.status["ready"]) == ("Running", True)
        assert second.status["primary"] == second.status["targetPrimary"] == "db-0"

        cached(store, [labelled(0, names.PRIMARY), labelled(1, names.REPLICA)], {"db": ["db-0"], "db-ro": ["db-1"]}, 9)
        third = await reconcile({**BODY, "status": second.status}, second.status, runtime)
        assert len(helm.upgrades) == 1 and len(labels(api)) == 2
        assert third.events == [] and third.status == second.status
        assert not third.helm_ran and not third.retry_soon

    asyncio.run(scenario())


def test_a_role_label_refused_keeps_the_pass(api: FakeApi) -> None:
    """The Helm run and the status still happen (with Helm's revision, so the next pass runs no Helm) and
    the daemon is told to retry soon, instead of the whole pass being lost to the exception."""
    api.failing["label_pod"] = ApiException(status=403, reason="Forbidden")

    async def scenario() -> None:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)
        cached(store, [pod(0), pod(1)], {}, 8)
        helm = FakeHelm()
        outcome = await reconcile(BODY, None, on_fakes(helm, store, api))
        assert len(helm.upgrades) == 1 and outcome.helm_ran and outcome.retry_soon
        assert outcome.problem is None and outcome.status["release"]["revision"] == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("pods_ready, holders", [(True, 0), (False, 1)], ids=["ready-leaves", "deploying-holds"])
def test_a_first_install_holds_a_rollout_place_until_its_pods_are_ready(
    api: FakeApi, pods_ready: bool, holders: int
) -> None:
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    routed = Observation(statefulset=STATEFULSET, pods=AFTER_HELM.pods, services=AFTER_HELM.services,
                         routes={"db": ("db-0",), "db-ro": ("db-1",)})
    after_helm = routed if pods_ready else Observation(
        statefulset=STATEFULSET, pods=[{**pod(0), "status": not_ready}], services=AFTER_HELM.services)
    api.observations[("ns", "db")] = after_helm

    async def scenario() -> int:
        store = ChildStore(on_change=lambda *_: None)
        for kind in KINDS:
            store.replace(kind, None, [], listed_at=1)
        runtime = on_fakes(FakeHelm(), store, api, rollouts=RolloutWindow(1))
        outcome = await reconcile(BODY, None, runtime)
        assert outcome.status["phase"] == ("Running" if pods_ready else "Deploying")
        return runtime.rollouts.holders()

    assert asyncio.run(scenario()) == holders
