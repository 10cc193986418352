"""act(): the prerequisites, the credentials Secret, claim growth, then Helm, in that order.

The API and Helm are fakes; the decision comes from the operator's own decide()."""

from __future__ import annotations

import dataclasses

import json
import logging
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from fake_api import FakeApi, FakeHelm, data_claim, run, running

from mydb_operator import names
from mydb_operator.model.observation import Observation
from mydb_operator.model.spec import parse_spec
from mydb_operator.reconcile.acting import act
from mydb_operator.reconcile.outcomes import Outcome, Target
from mydb_operator.reconcile.planning import decide
from mydb_operator.reconcile.runtime import Runtime
from mydb_operator.status.problem import Problem

SPEC = {"replicas": 2, "version": "15.2", "storage": "1Gi"}
INSTALLED = {"name": "db", "revision": 4, "chart": "mydatabase-0.1.0", "appliedHash": "old", "status": "deployed",
             "spec": {"replicas": 2, "version": "15.2", "storage": "1Gi", "hibernate": False, "backup": False}}
SETTLED = {"type": "Install", "startedAt": "2026-01-01T00:00:00Z", "result": "Succeeded"}
SECRET = ("ns", names.credentials_secret_name("db"))


def target(applied: dict[str, Any] | None = None, operation: dict[str, Any] | None = None, **changes: Any) -> Target:
    return Target("ns", "db", parse_spec({**SPEC, **changes}), applied, operation)


def acted(runtime: Runtime, target: Target, observed: Observation) -> Outcome:
    async def both() -> Outcome:
        return await act(target, observed, await decide(target, observed, runtime), runtime)

    return run(both())


def reasons(outcome: Outcome) -> list[str]:
    return [reason for _, reason, _ in outcome.events]


def test_a_first_install_creates_the_secret_then_runs_helm(api: FakeApi, helm: FakeHelm, runtime: Runtime,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    api.observations[("ns", "db")] = after_helm = running()
    with caplog.at_level(logging.INFO):
        outcome = acted(runtime, target(), Observation())
    assert list(api.secrets) == [SECRET]
    [(namespace, release, values)] = helm.upgrades
    assert (namespace, release, values["replicas"]) == ("ns", "db", 2)
    assert outcome.applied is not None
    assert {k: outcome.applied[k] for k in ("name", "revision", "chart", "status")} == {
        "name": "db", "revision": 1, "chart": "mydatabase-0.1.0", "status": "deployed"}
    assert outcome.applied["spec"] == INSTALLED["spec"] and len(outcome.applied["appliedHash"]) == 16
    assert outcome.operation is not None
    assert (outcome.operation["type"], outcome.operation["result"]) == ("Install", "InProgress")
    assert reasons(outcome) == []  # status tells the install (release, lastOperation): no API write for an Event
    assert "helm revision 1 applied: Install" in caplog.text
    assert "created Secret db-credentials with random passwords" in caplog.text
    assert outcome.observed == after_helm and outcome.problem is None


def test_an_upgrade_names_its_operation_and_creates_no_secret(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    outcome = acted(runtime, target(INSTALLED, SETTLED, replicas=3), running())
    assert api.secrets == {} and len(helm.upgrades) == 1
    assert outcome.applied is not None and outcome.applied["spec"]["replicas"] == 3
    assert outcome.operation is not None and outcome.operation["type"] == "Scale"
    assert reasons(outcome) == ["Applied"]
    assert "Scale, spec or chart changed" in outcome.events[-1][2]


def test_a_missing_storage_class_stops_before_the_secret_and_helm(api: FakeApi, helm: FakeHelm,
                                                                  runtime: Runtime) -> None:
    outcome = acted(runtime, target(storageClassName="missing"), Observation())
    assert outcome.problem is not None and outcome.problem.reason == "StorageClassNotFound"
    assert "StorageClass missing does not exist" in outcome.problem.message
    assert helm.upgrades == [] and api.secrets == {}
    assert outcome.applied is None and outcome.events == []


def test_a_first_install_restores_only_from_a_backups_volume_that_exists(api: FakeApi, helm: FakeHelm,
                                                                         runtime: Runtime) -> None:
    missing = acted(runtime, target(restore={"fromDatabase": "old"}), Observation())
    assert missing.problem is not None and missing.problem.reason == "RestoreSourceMissing"
    assert names.backups_claim_name("old") in missing.problem.message and helm.upgrades == []

    api.claims[("ns", names.backups_claim_name("old"))] = {}
    restored = acted(runtime, target(restore={"fromDatabase": "old"}), Observation())
    assert restored.problem is None and len(helm.upgrades) == 1
    assert helm.upgrades[0][2]["restore"]["claimName"] == names.backups_claim_name("old")


def test_an_installed_database_needs_its_restore_source_no_longer(api: FakeApi, helm: FakeHelm,
                                                                  runtime: Runtime) -> None:
    outcome = acted(runtime, target(INSTALLED, SETTLED, replicas=3, restore={"fromDatabase": "old"}), running())
    assert outcome.problem is None and len(helm.upgrades) == 1


def test_a_users_secret_is_checked_never_created(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    mine = target(credentials={"secretName": "mine"})
    absent = acted(runtime, mine, Observation())
    assert absent.problem is not None and absent.problem.reason == "CredentialsMissing"
    assert "Secret mine does not exist in namespace ns" in absent.problem.message

    api.secrets[("ns", "mine")] = {"data": {"username": "cG9zdGdyZXM=", "password": "eA=="}}
    incomplete = acted(runtime, mine, Observation())
    assert incomplete.problem is not None and incomplete.problem.reason == "CredentialsInvalid"
    assert "lacks the keys replication-username, replication-password" in incomplete.problem.message
    assert helm.upgrades == []

    api.secrets[("ns", "mine")]["stringData"] = {"replication-username": "r", "replication-password": "p"}
    complete = acted(runtime, mine, Observation())
    assert complete.problem is None and len(helm.upgrades) == 1
    assert list(api.secrets) == [("ns", "mine")] and reasons(complete) == []
    assert helm.upgrades[0][2]["credentials"]["secretName"] == "mine"


def test_growing_storage_grows_every_claim_then_recreates_the_statefulset(api: FakeApi, helm: FakeHelm,
                                                                          runtime: Runtime) -> None:
    api.storage_class_object("fast", expandable=True)
    api.statefulsets[("ns", "db")] = running().statefulset  # type: ignore[assignment]
    observed = running(claims=[data_claim(0, storage_class="fast"), data_claim(1, storage_class="fast")])
    outcome = acted(runtime, target(INSTALLED, SETTLED, storage="2Gi"), observed)
    assert api.grown == [("ns", "data-db-0", "2Gi"), ("ns", "data-db-1", "2Gi")]
    assert api.orphaned == [("ns", "db")]
    assert helm.upgrades[0][2]["storage"]["size"] == "2Gi"
    assert reasons(outcome) == ["Resizing", "Applied"]
    assert outcome.events[0][2].startswith("growing 2 claims to 2Gi")
    assert outcome.operation is not None and outcome.operation["type"] == "Resize"


def test_a_statefulset_that_never_goes_away_stalls_the_resize(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    api.storage_class_object("fast", expandable=True)
    api.orphaning_times_out = True
    observed = running(claims=[data_claim(0, storage_class="fast")])
    outcome = acted(runtime, target(INSTALLED, SETTLED, storage="2Gi"), observed)
    assert outcome.problem is not None and outcome.problem.reason == "ResizeStalled"
    assert helm.upgrades == [] and (outcome.applied, outcome.operation) == (INSTALLED, SETTLED)


def test_a_refused_claim_growth_is_told_in_status_and_helm_waits(api: FakeApi, helm: FakeHelm,
                                                                   runtime: Runtime) -> None:
    api.storage_class_object("fast", expandable=True)
    api.refusal = ApiException(status=403, reason="Forbidden")
    api.refusal.body = json.dumps({"kind": "Status", "message": "exceeded quota: storage, requested: 1Gi"})
    observed = running(claims=[data_claim(0, storage_class="fast")])
    outcome = acted(runtime, target(INSTALLED, SETTLED, storage="2Gi"), observed)
    assert outcome.problem == Problem("ResizeFailed", "growing the claims to 2Gi: exceeded quota: storage, requested: 1Gi")
    assert helm.upgrades == [] and api.orphaned == [] and (outcome.applied, outcome.operation) == (INSTALLED, SETTLED)


def test_an_unreachable_api_during_growth_is_left_to_the_daemons_back_off(api: FakeApi, helm: FakeHelm,
                                                                          runtime: Runtime) -> None:
    api.storage_class_object("fast", expandable=True)
    api.refusal = ApiException(status=503, reason="Service Unavailable")
    observed = running(claims=[data_claim(0, storage_class="fast")])
    with pytest.raises(ApiException):
        acted(runtime, target(INSTALLED, SETTLED, storage="2Gi"), observed)
    assert helm.upgrades == []


def installed_as_decided(runtime: Runtime) -> Target:
    """A database installed with the values decide() makes now: only a drift makes Helm run (a repair)."""
    first = run(decide(target(), Observation(), runtime))
    return target({**INSTALLED, "appliedHash": first.values_hash}, SETTLED)


def test_a_drift_is_put_back_by_helm(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    outcome = acted(runtime, installed_as_decided(runtime), running(replicas=5))
    assert len(helm.upgrades) == 1 and outcome.problem is None
    assert outcome.operation is not None and outcome.operation["type"] == "Repair"


def test_nothing_is_put_back_in_a_namespace_being_deleted(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    """Its objects go first and the database last: Helm would be refused, and the pass lets the database go."""
    api.terminating.add("ns")
    gone = Observation(statefulset=None, services=sorted(names.release_services("db")))
    outcome = acted(runtime, installed_as_decided(runtime), gone)
    assert helm.upgrades == [] and ("namespace_terminating", "ns") in api.reads
    assert outcome.problem == Problem("NamespaceDeleting", "the namespace is being deleted: the StatefulSet is missing")
    assert outcome.operation == SETTLED and reasons(outcome) == []


def test_a_helm_failure_keeps_the_last_release(api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    helm.failure = "UPGRADE FAILED: timed out"
    outcome = acted(runtime, target(INSTALLED, SETTLED, replicas=3), running())
    assert outcome.problem is not None
    assert (outcome.problem.reason, outcome.problem.message) == ("HelmFailed", "UPGRADE FAILED: timed out")
    assert (outcome.applied, outcome.operation, outcome.events) == (INSTALLED, SETTLED, [])


def test_a_first_install_whose_helm_fails_still_tells_of_the_secret(api: FakeApi, helm: FakeHelm,
                                                                    runtime: Runtime) -> None:
    helm.failure = "INSTALL FAILED: boom"
    outcome = acted(runtime, target(), Observation())
    assert list(api.secrets) == [SECRET] and outcome.problem is not None
    assert reasons(outcome) == ["CredentialsCreated"]


def test_an_earlier_major_is_refused_although_the_rest_applies(api: FakeApi, helm: FakeHelm,
                                                                runtime: Runtime) -> None:
    outcome = acted(runtime, target(INSTALLED, SETTLED, version="15.2", replicas=3), running(version="16.1"))
    assert outcome.problem is not None and outcome.problem.reason == "ChangeRefused"
    assert "goes back a major" in outcome.problem.message
    assert helm.upgrades[0][2]["image"]["tag"] == "16.1" and helm.upgrades[0][2]["replicas"] == 3
    assert outcome.applied is not None and outcome.applied["spec"]["version"] == "16.1"


def test_a_major_upgrades_hold_applies_its_version_and_replicas_instead_of_the_specs(
        api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    """While the pods stop for pg_upgrade: the old version at 0 replicas (reconcile/upgrading.py)."""
    held = dataclasses.replace(target(INSTALLED, SETTLED, version="17.2", replicas=3), hold=("15.2", 0))
    outcome = acted(runtime, held, running(version="15.2"))
    assert outcome.problem is None
    assert helm.upgrades[0][2]["image"]["tag"] == "15.2" and helm.upgrades[0][2]["replicas"] == 0


def test_while_the_primary_moves_a_pass_leaves_helm_for_later_rather_than_queue_behind_other_databases(
        api: FakeApi, helm: FakeHelm, runtime: Runtime) -> None:
    """A failover's next step must not wait in the same pass behind other databases' Helm runs: with every permit
    to act taken, an urgent pass returns at once, Helm not run and the outcome deferred; with a permit free, or a
    pass that is not urgent, Helm runs as usual."""
    from mydb_operator.reconcile.converging import converge

    drifted, installed = running(replicas=5), installed_as_decided(runtime)

    async def with_permits_taken(urgent: bool) -> Outcome:
        taken = 0
        while not runtime.acting.locked():
            await runtime.acting.acquire()
            taken += 1
        try:
            return await converge(installed, drifted, runtime, fresh=True, urgent=urgent)
        finally:
            for _ in range(taken):
                runtime.acting.release()

    deferred = run(with_permits_taken(urgent=True))
    assert deferred.deferred and helm.upgrades == []
    free = run(converge(installed, drifted, runtime, fresh=True, urgent=True))
    assert not free.deferred and len(helm.upgrades) == 1
