"""decide(): whether Helm must run, why, and with which values, for what the cluster shows.

The API (StorageClasses) and Helm's chart digest are fakes; the planning, the
policies and the values are the operator's own."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonpatch
from fake_api import FakeApi, FakeHelm, data_claim, make_runtime, run, running

from mydb_operator import names
from mydb_operator.desired.platform import Platform
from mydb_operator.model.observation import Observation
from mydb_operator.model.spec import parse_spec
from mydb_operator.reconcile.outcomes import Target
from mydb_operator.reconcile.planning import Decision, decide
from mydb_operator.reconcile.runtime import Runtime

SPEC = {"replicas": 2, "version": "15.2", "storage": "1Gi"}


def target(applied: dict[str, Any] | None = None, **changes: Any) -> Target:
    return Target("ns", "db", parse_spec({**SPEC, **changes}), applied, None)


def decided(runtime: Runtime, target: Target, observed: Observation) -> Decision:
    return run(decide(target, observed, runtime))


def test_a_first_install_runs_helm_with_the_specs_values(api: FakeApi, runtime: Runtime) -> None:
    decision = decided(runtime, target(), Observation())
    assert decision.why == "first install"
    assert (decision.values["replicas"], decision.values["image"]["tag"], decision.values["storage"]["size"]) == (
        2, "15.2", "1Gi")
    assert decision.values["credentials"]["secretName"] == names.credentials_secret_name("db")
    assert len(decision.values_hash) == 16 and not decision.repair
    assert decision.problem is None and decision.storage_blocked is None


def test_the_applied_hash_with_nothing_drifted_means_no_helm_run(api: FakeApi, runtime: Runtime) -> None:
    first = decided(runtime, target(), Observation())
    again = decided(runtime, target(applied={"appliedHash": first.values_hash}), running())
    assert again.values_hash == first.values_hash
    assert again.repair and again.why is None


def test_a_hand_scaled_statefulset_is_put_back(api: FakeApi, runtime: Runtime) -> None:
    applied = {"appliedHash": decided(runtime, target(), Observation()).values_hash}
    decision = decided(runtime, target(applied), running(replicas=5))
    assert decision.repair
    assert decision.why == "the StatefulSet has 5 replicas instead of 2"


def test_a_deleted_service_is_put_back(api: FakeApi, runtime: Runtime) -> None:
    applied = {"appliedHash": decided(runtime, target(), Observation()).values_hash}
    observed = running()
    without_ro = Observation(statefulset=observed.statefulset, services=["db", "db-headless"])
    assert decided(runtime, target(applied), without_ro).why == "Service db-ro is missing"


def test_a_changed_spec_runs_helm_again(api: FakeApi, runtime: Runtime) -> None:
    applied = {"appliedHash": decided(runtime, target(), Observation()).values_hash}
    decision = decided(runtime, target(applied, replicas=3), running())
    assert decision.why == "spec or chart changed" and not decision.repair
    assert decision.values["replicas"] == 3


def test_a_new_chart_changes_every_hash(api: FakeApi, runtime: Runtime) -> None:
    before = decided(runtime, target(), Observation())
    after = decided(make_runtime(FakeHelm(digest="fedcba9876543210"), api=api), target(), Observation())
    assert after.values == before.values and after.values_hash != before.values_hash


def test_a_minor_version_change_rolls_out(api: FakeApi, runtime: Runtime) -> None:
    decision = decided(runtime, target({"appliedHash": "old"}, version="15.4"), running(version="15.2"))
    assert decision.values["image"]["tag"] == "15.4" and decision.problem is None


def test_an_earlier_major_is_held_back_while_the_rest_rolls_out(api: FakeApi, runtime: Runtime) -> None:
    decision = decided(runtime, target({"appliedHash": "old"}, version="15.2", replicas=3), running(version="16.1"))
    assert decision.problem is not None and decision.problem.reason == "ChangeRefused"
    assert "16.1 -> 15.2" in decision.problem.message
    assert decision.effective.version == "16.1" and decision.values["image"]["tag"] == "16.1"
    assert decision.values["replicas"] == 3 and decision.why == "spec or chart changed"


def test_storage_grows_where_the_claims_storage_class_allows_it(api: FakeApi, runtime: Runtime) -> None:
    api.storage_class_object("fast", expandable=True)
    observed = running(claims=[data_claim(0, storage_class="fast"), data_claim(1, storage_class="fast")])
    decision = decided(runtime, target({"appliedHash": "old"}, storage="2Gi"), observed)
    assert decision.storage.grow and decision.values["storage"]["size"] == "2Gi"
    assert decision.storage_blocked is None and decision.problem is None


def test_storage_the_class_cannot_expand_keeps_its_size_and_says_why(api: FakeApi, runtime: Runtime) -> None:
    api.storage_class_object("fixed", expandable=False)
    observed = running(claims=[data_claim(0, storage_class="fixed")])
    decision = decided(runtime, target({"appliedHash": "old"}, storage="2Gi", replicas=3), observed)
    assert not decision.storage.grow and decision.values["storage"]["size"] == "1Gi"
    assert decision.storage_blocked is not None and "does not allow volume expansion" in decision.storage_blocked
    assert decision.problem is None and decision.values["replicas"] == 3  # the rest still rolls out


def test_claims_that_name_no_class_are_judged_by_the_default_class(api: FakeApi, runtime: Runtime) -> None:
    api.storage_class_object("other", expandable=True)
    api.storage_class_object("standard", expandable=False, default=True)
    decision = decided(runtime, target({"appliedHash": "old"}, storage="2Gi"), running(claims=[data_claim(0)]))
    assert not decision.storage.grow and decision.storage_blocked is not None


def test_storage_never_shrinks(api: FakeApi, runtime: Runtime) -> None:
    decision = decided(runtime, target({"appliedHash": "old"}, storage="1Gi"), running(size="2Gi"))
    assert decision.values["storage"]["size"] == "2Gi"
    assert decision.storage_blocked == "storage cannot shrink from 2Gi to 1Gi"


def test_a_parameter_the_operator_owns_is_an_invalid_spec_and_runs_nothing(api: FakeApi, runtime: Runtime) -> None:
    decision = decided(runtime, target(postgresql={"parameters": {"fsync": "off"}}), Observation())
    assert decision.problem is not None and decision.problem.reason == "InvalidSpec"
    assert "fsync" in decision.problem.message
    assert decision.why is None and decision.values == {}


def test_a_platform_patch_that_does_not_apply_runs_nothing(api: FakeApi, helm: FakeHelm) -> None:
    platform = Platform(value_patches=jsonpatch.JsonPatch([{"op": "replace", "path": "/nowhere/x", "value": 1}]))
    decision = decided(make_runtime(helm, platform, api=api), target(), Observation())
    assert decision.problem is not None and decision.problem.reason == "PlatformPatchFailed"
    assert decision.why is None


def test_nothing_applied_keeps_the_last_release_and_operation(api: FakeApi, runtime: Runtime) -> None:
    api.storage_class_object("fixed", expandable=False)
    applied, operation = {"appliedHash": "x", "revision": 3}, {"type": "Scale", "result": "Succeeded"}
    waiting = Target("ns", "db", parse_spec({**SPEC, "storage": "2Gi"}), applied, operation)
    observed = running(claims=[data_claim(0, storage_class="fixed")])
    outcome = decided(runtime, waiting, observed).unchanged(waiting, observed)
    assert (outcome.applied, outcome.operation, outcome.observed, outcome.events) == (applied, operation, observed, [])
    assert outcome.storage_blocked is not None and "does not allow volume expansion" in outcome.storage_blocked
    assert outcome.problem is None and outcome.status == {}


def test_claims_that_name_no_class_are_judged_by_the_specs_class_before_the_default(api: FakeApi,
                                                                                  runtime: Runtime) -> None:
    api.storage_class_object("fixed", expandable=False)
    api.storage_class_object("standard", expandable=True, default=True)
    decision = decided(runtime, target({"appliedHash": "old"}, storage="2Gi", storageClassName="fixed"),
                       running(claims=[data_claim(0)]))
    assert not decision.storage.grow and decision.storage_blocked is not None


def test_the_owner_is_in_the_values_only_when_the_chart_owns_its_objects(api: FakeApi, helm: FakeHelm) -> None:
    owned = Target("ns", "db", parse_spec(SPEC), None, None, uid="u-1")
    assert "owner" not in decided(make_runtime(helm, api=api), owned, Observation()).values
    owning = dataclasses.replace(make_runtime(helm, api=api), owns_children=True)
    assert decided(owning, owned, Observation()).values["owner"]["uid"] == "u-1"
