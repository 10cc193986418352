"""policy/major_upgrade.py and desired/upgrade_job.py: the steps of a major upgrade, and its Job."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mydb_operator.desired.upgrade_job import major_upgrade_job
from mydb_operator.model.instances import InstanceFacts
from mydb_operator.model.spec import parse_spec
from mydb_operator.policy.major_upgrade import (
    FAILED,
    STARTING,
    STOPPING,
    SUCCEEDED,
    UPGRADING,
    WAITING,
    Facts,
    UpgradeState,
    known_state,
    next_step,
    upgraded_now,
)

SPEC = parse_spec({"replicas": 2, "version": "17.6", "storage": "1Gi"})
NOW = "2026-12-03T18:00:00Z"


def pod(name: str, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def facts(**changes: Any) -> Facts:
    base = Facts(
        running="15.2",
        primary="db-0",
        pods=(pod("db-0"), pod("db-1")),
        probes={"db-0": InstanceFacts("db-0", False, 1, 100, version="15.14"),
                "db-1": InstanceFacts("db-1", True, 1, 100, replay_lsn=100, version="15.14")},
        job=None,
        job_failure="",
        retry="",
        now=NOW,
        release="db",
    )
    return dataclasses.replace(base, **changes)


def state(phase: str, **changes: Any) -> UpgradeState:
    return dataclasses.replace(UpgradeState("15.2", "17.6", phase, NOW, "db-0", "db-upgrade-1", "m"), **changes)


def job(condition: str) -> dict[str, Any]:
    return {"metadata": {"name": "db-upgrade-1"}, "status": {"conditions": [{"type": condition, "status": "True"}]}}


def test_nothing_to_do_within_a_major_or_without_a_running_version():
    assert next_step(parse_spec({"replicas": 2, "version": "15.3", "storage": "1Gi"}), None, facts()).hold is None
    assert next_step(SPEC, None, facts(running=None)).hold is None


def test_a_later_major_waits_for_every_replica_to_replay_all_of_the_primarys_wal():
    behind = facts(probes={**facts().probes, "db-1": InstanceFacts("db-1", True, 1, 100, replay_lsn=90)})
    step = next_step(SPEC, None, behind)
    assert step.state is not None and step.state.phase == WAITING and "db-1 to replay" in step.state.message
    assert step.hold == ("15.2", 2) and step.event is None
    one_down = next_step(SPEC, None, facts(pods=(pod("db-0"), pod("db-1", ready=False))))
    assert one_down.state is not None and "every pod to be ready (1/2)" in one_down.state.message


def test_a_database_with_the_continuous_archive_is_upgraded_too():
    """Its archive stops with the pods; the new major's archive pod moves the old major's aside
    (scripts/archive-major.sh)."""
    archived = parse_spec({**{"replicas": 2, "version": "17.6", "storage": "1Gi"},
                           "backup": {"schedule": "0 2 * * *"}})
    step = next_step(archived, None, facts())
    assert step.state is not None and step.state.phase == STOPPING


def test_only_the_pass_that_ends_an_upgrade_says_it_did():
    state = UpgradeState("15.2", "17.6", SUCCEEDED, started_at="2026-12-03T18:00:00Z")
    starting_status = {"upgrade": {**state.as_status(), "phase": STARTING}}
    assert upgraded_now(starting_status, state)
    assert not upgraded_now({"upgrade": state.as_status()}, state)
    assert not upgraded_now(starting_status, dataclasses.replace(state, phase=STARTING))
    assert not upgraded_now(starting_status, None)


def test_then_every_pod_stops_at_the_old_version_with_one_event():
    step = next_step(SPEC, None, facts())
    assert step.state is not None and (step.state.phase, step.state.started_at) == (STOPPING, NOW)
    assert step.hold == ("15.2", 0) and step.event is not None and step.event[1] == "MajorUpgradeStarted"


def test_the_job_starts_once_every_pod_is_gone_and_is_named_after_the_attempt():
    stopping = state(STOPPING, job="")
    assert next_step(SPEC, stopping, facts()).start_job is False
    step = next_step(SPEC, stopping, facts(pods=()))
    assert step.start_job and step.state is not None and step.state.phase == UPGRADING
    assert step.state.job.startswith("db-upgrade-") and step.hold == ("15.2", 0)


def test_a_spec_change_while_the_pods_are_down_waits_for_the_jobs_outcome():
    back = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi"})
    step = next_step(back, state(UPGRADING), facts(pods=(), job=job("Running")))
    assert step.hold == ("15.2", 0) and step.state is not None and step.state.phase == UPGRADING
    assert next_step(SPEC, state(UPGRADING), facts(pods=(), job=None)).start_job  # gone: made again
    told = next_step(SPEC, state(UPGRADING, message="the upgrade Job could not be created: quota"),
                     facts(pods=(), job=job("Running")))
    assert told.state is not None and told.state.message.startswith("pg_upgrade of db-0's data from PostgreSQL 15.2")


def test_a_succeeded_job_starts_the_new_major_then_analyze_finishes_it():
    step = next_step(SPEC, state(UPGRADING), facts(pods=(), job=job("Complete")))
    assert step.state is not None and step.state.phase == STARTING and step.hold is None
    old_primary = facts(running="17.6")  # the probes still say 15.14: not the new server yet
    assert next_step(SPEC, step.state, old_primary).analyze is False
    new = facts(running="17.6", probes={"db-0": InstanceFacts("db-0", False, 1, 5, version="17.6")})
    done = next_step(SPEC, step.state, new)
    assert done.analyze and done.state is not None and (done.state.phase, done.state.finished_at) == (SUCCEEDED, NOW)
    assert done.event is not None and done.event[1] == "MajorUpgradeSucceeded"
    assert next_step(SPEC, done.state, new).hold is None  # and nothing more to do


def test_a_failed_job_brings_the_old_major_back_and_waits_for_the_retry_annotation():
    why = "major-upgrade: pg_upgrade --check from PostgreSQL 15 to 17 failed: reg* data types"
    step = next_step(SPEC, state(UPGRADING), facts(pods=(), job=job("Failed"), job_failure=why))
    assert step.state is not None and (step.state.phase, step.state.message) == (FAILED, why)
    assert step.hold == ("15.2", 2) and step.event is not None and step.event[0] == "Warning"
    assert next_step(SPEC, step.state, facts()).hold == ("15.2", 2)  # stays down a major
    retried = next_step(SPEC, step.state, facts(retry="1"))
    assert retried.state is not None and (retried.state.phase, retried.state.retry) == (STOPPING, "1")
    back = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi"})
    assert next_step(back, step.state, facts()).hold is None  # the user gave up: the spec's version applies


def test_the_state_reads_back_from_status_as_written():
    written = state(FAILED, message="why", finished_at=NOW)
    assert known_state({"upgrade": written.as_status()}) == written
    assert written.as_status()["fromVersion"] == "15.2" and "finished_at" not in written.as_status()
    assert known_state({}) is None and known_state({"upgrade": {"phase": "Failed"}}) is None


STATEFULSET: dict[str, Any] = {
    "metadata": {"name": "db", "namespace": "ns", "ownerReferences": [{"kind": "MyDatabase", "uid": "u"}]},
    "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/instance": "db", "role": "replica"}},
                          "spec": {
        "securityContext": {"runAsUser": 999}, "nodeSelector": {"pool": "db"}, "terminationGracePeriodSeconds": 120,
        "initContainers": [{
            "name": "bootstrap", "image": "reg/library/postgres:17.6", "imagePullPolicy": "IfNotPresent",
            "securityContext": {"readOnlyRootFilesystem": True}, "resources": {"limits": {"cpu": "1"}},
            "env": [{"name": "POD_NAME"}, {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
                    {"name": "CREDENTIALS_DIR", "value": "/etc/mydatabase/credentials"}, {"name": "RESTORE_FROM"}],
            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"},
                             {"name": "scripts", "mountPath": "/scripts"}, {"name": "tmp", "mountPath": "/tmp"},
                             {"name": "credentials", "mountPath": "/etc/mydatabase/credentials"},
                             {"name": "restore-source", "mountPath": "/restore"}]}],
        "containers": [{"name": "postgres", "image": "reg/library/postgres:17.6"}],
        "volumes": [{"name": "scripts", "configMap": {"name": "db-scripts"}}, {"name": "tmp", "emptyDir": {}},
                    {"name": "credentials", "secret": {"secretName": "db-credentials"}},
                    {"name": "restore-source", "persistentVolumeClaim": {"claimName": "x"}}]}}}}


def test_the_job_runs_the_new_image_on_the_primarys_claim_with_the_old_programs_copied_first():
    made = major_upgrade_job(STATEFULSET, "db", "db-upgrade-1", "db-1", "reg/library/postgres:15.2")
    pod_spec = made["spec"]["template"]["spec"]
    [copy], [upgrade] = pod_spec["initContainers"], pod_spec["containers"]
    assert (copy["image"], copy["command"][-1]) == ("reg/library/postgres:15.2", "/scripts/old-binaries.sh")
    assert (upgrade["image"], upgrade["command"][-1]) == ("reg/library/postgres:17.6", "/scripts/major-upgrade.sh")
    assert {e["name"] for e in upgrade["env"]} == {"PGDATA", "CREDENTIALS_DIR", "OLD_ROOT"}
    assert {m["name"] for m in upgrade["volumeMounts"]} == {"data", "scripts", "tmp", "credentials", "old"}
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}} in pod_spec["volumes"]
    assert "restore-source" not in {v["name"] for v in pod_spec["volumes"]}
    assert upgrade["securityContext"] == {"readOnlyRootFilesystem": True} == copy["securityContext"]
    assert pod_spec["nodeSelector"] == {"pool": "db"} and pod_spec["restartPolicy"] == "Never"
    assert made["spec"]["backoffLimit"] == 0 and made["metadata"]["ownerReferences"][0]["uid"] == "u"
    # Never a database pod: no role label, so no Service routes to it.
    assert made["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "major-upgrade"
    assert "role" not in made["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("condition", ["Complete", "SuccessCriteriaMet"])
def test_a_job_that_met_its_success_criteria_has_succeeded(condition):
    from mydb_operator.policy.major_upgrade import job_outcome

    assert job_outcome(job(condition)) == SUCCEEDED and job_outcome(None) is None
