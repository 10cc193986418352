"""backup_on_demand(): a new backup-now annotation value becomes one Job, once, against a fake API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_api import FakeApi, run
from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster.slimming import slim
from mydb_operator.model.observation import Observation
from mydb_operator.reconcile.on_demand_backup import backup_on_demand, verify_on_demand

CRONJOB = {
    "metadata": {"name": "db-backup", "namespace": "ns", "uid": "u-1"},
    "spec": {"jobTemplate": {"metadata": {"labels": {"app": "backup"}},
                             "spec": {"template": {"spec": {"containers": [{"name": "backup"}]}}}}},
}
WITH_BACKUP = Observation(cronjob=slim("cronjobs", CRONJOB))  # as cached: no Job template


@pytest.fixture(autouse=True)
def cronjob_in_the_api(api: FakeApi) -> None:
    api.cronjobs[("ns", "db-backup")] = CRONJOB


def asked(token: str) -> dict[str, str]:
    return {names.BACKUP_NOW_ANNOTATION: token}


def backup(api: FakeApi, annotations: dict[str, str], previous: dict[str, Any],
           observed: Observation = WITH_BACKUP) -> Any:
    return run(backup_on_demand(api, "ns", "db", annotations, previous, observed))


def test_a_new_request_starts_one_job_from_the_cronjob(api: FakeApi) -> None:
    fields, events = backup(api, asked("t1"), {})
    job_name = names.on_demand_backup_job("db", "t1")
    assert list(api.jobs) == [("ns", job_name)]
    job = api.jobs[("ns", job_name)]
    assert job["metadata"]["annotations"][names.BACKUP_NOW_ANNOTATION] == "t1"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert job["spec"] == CRONJOB["spec"]["jobTemplate"]["spec"]
    assert fields == {"lastOnDemandRequest": "t1", "lastOnDemandJob": job_name}
    assert events == [("Normal", "BackupRequested", f"backup-now=t1: started Job {job_name}")]


def test_a_request_already_answered_starts_nothing_and_keeps_what_status_said(api: FakeApi) -> None:
    previous = {"backup": {"lastOnDemandRequest": "t1", "lastOnDemandJob": "db-backup-x",
                           "lastSuccessfulTime": "2026-01-01T00:00:00Z"}}
    assert backup(api, asked("t1"), previous) == ({"lastOnDemandRequest": "t1", "lastOnDemandJob": "db-backup-x"}, [])
    assert backup(api, {}, previous) == ({"lastOnDemandRequest": "t1", "lastOnDemandJob": "db-backup-x"}, [])
    assert api.jobs == {}


def test_no_request_no_job(api: FakeApi) -> None:
    assert backup(api, {}, {}) == ({}, [])
    assert api.jobs == {}


def test_a_request_without_spec_backup_is_answered_with_a_warning(api: FakeApi) -> None:
    fields, events = backup(api, asked("t2"), {}, Observation())
    assert fields == {"lastOnDemandRequest": "t2"}
    assert events == [("Warning", "BackupNotConfigured", "backup-now=t2 ignored: spec.backup is not set")]
    assert api.jobs == {}


def test_a_job_made_before_a_restart_is_reported_not_made_twice(api: FakeApi) -> None:
    job_name = names.on_demand_backup_job("db", "t3")
    api.jobs[("ns", job_name)] = {"metadata": {"name": job_name, "namespace": "ns"}, "made": "before the restart"}
    fields, events = backup(api, asked("t3"), {"backup": {"lastOnDemandRequest": "t2"}})
    assert fields == {"lastOnDemandRequest": "t3", "lastOnDemandJob": job_name}
    assert api.jobs[("ns", job_name)]["made"] == "before the restart" and len(api.jobs) == 1
    assert [reason for _, reason, _ in events] == ["BackupRequested"]


def test_a_cronjob_deleted_since_the_cache_saw_it_leaves_the_request_for_the_next_pass(api: FakeApi) -> None:
    del api.cronjobs[("ns", "db-backup")]
    assert backup(api, asked("t3"), {}) == ({}, [])
    assert api.jobs == {}


def test_a_job_the_api_refuses_answers_the_request_with_one_warning(api: FakeApi) -> None:
    refusal = ApiException(status=403, reason="Forbidden")
    refusal.body = json.dumps({"message": "exceeded quota: jobs, requested: count/jobs.batch=1"})
    api.failing["create_job_once"] = refusal
    previous = {"backup": {"lastOnDemandRequest": "t0", "lastOnDemandJob": "db-backup-t0"}}
    fields, events = backup(api, asked("t1"), previous)
    assert fields == {"lastOnDemandRequest": "t1"}  # answered: one Warning, not one per pass
    assert events == [("Warning", "BackupRequestFailed",
                       "backup-now=t1: exceeded quota: jobs, requested: count/jobs.batch=1")]
    assert backup(api, asked("t1"), {"backup": fields}) == (fields, [])  # the next pass: nothing again


def test_an_unreachable_api_leaves_the_request_open_without_a_warning(api: FakeApi) -> None:
    api.failing["create_job_once"] = ConnectionRefusedError(111, "Connection refused")
    previous = {"backup": {"lastOnDemandRequest": "t0", "lastOnDemandJob": "db-backup-t0"}}
    assert backup(api, asked("t1"), previous) == (previous["backup"], [])


def first(api: FakeApi, previous: dict[str, Any], continuous: bool = True) -> Any:
    return run(backup_on_demand(api, "ns", "db", {}, previous, WITH_BACKUP, continuous, 15))


def test_a_new_database_with_the_archive_gets_its_first_base_backup_once_it_is_ready(api: FakeApi) -> None:
    """Recovery needs a base backup: the first is not left to the schedule, and is started once."""
    assert first(api, {"ready": False}) == ({}, [])
    assert api.jobs == {}
    fields, events = first(api, {"ready": True})
    job_name = names.first_base_backup_job("db", 15)  # never a backup-now value's: the user may ask for "first"
    assert list(api.jobs) == [("ns", job_name)]
    assert fields == {"firstBackupJob": job_name}
    assert events == [("Normal", "BackupRequested",
                       f"the continuous archive's first base backup: started Job {job_name}")]
    again = {"ready": True, "backup": fields}
    assert first(api, again) == (fields, [])
    assert len(api.jobs) == 1


def test_no_first_base_backup_without_the_archive_or_once_a_base_backup_exists(api: FakeApi) -> None:
    assert first(api, {"ready": True}, continuous=False) == ({}, [])
    assert first(api, {"ready": True, "backup": {"lastBaseBackup": "2026-01-01T02:00:00Z"}}) == ({}, [])
    assert api.jobs == {}
    # A database upgraded from dumps only: successes, but no base backup yet.
    fields, _ = first(api, {"ready": True, "backup": {"lastSuccessfulTime": "2026-01-01T02:00:00Z"}})
    assert fields == {"firstBackupJob": names.first_base_backup_job("db", 15)}


def verify(api: FakeApi, annotations: dict[str, str], previous: dict[str, Any],
           observed: Observation = WITH_BACKUP) -> Any:
    return run(verify_on_demand(api, "ns", "db", annotations, previous, observed, "5Gi"))


def test_a_verification_request_starts_one_job_running_verify_sh_with_a_scratch_volume(api: FakeApi) -> None:
    fields, events = verify(api, {names.VERIFY_BACKUP_ANNOTATION: "v1"}, {})
    job_name = names.verification_job("db", "v1")
    assert fields == {"lastVerificationRequest": "v1", "lastVerificationJob": job_name}
    assert events == [("Normal", "VerificationRequested", f"verify-backup=v1: started Job {job_name}")]
    job = api.jobs[("ns", job_name)]
    assert job["metadata"]["labels"][names.ON_DEMAND_BACKUP_LABEL] == "verify"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["/bin/sh", "/scripts/verify.sh"]
    assert {"name": "verify", "emptyDir": {"sizeLimit": "5Gi"}} in pod["volumes"]
    assert verify(api, {names.VERIFY_BACKUP_ANNOTATION: "v1"}, {"backup": fields}) == (fields, [])
    assert len(api.jobs) == 1


def test_a_verification_request_without_spec_backup_is_answered_with_a_warning(api: FakeApi) -> None:
    fields, events = verify(api, {names.VERIFY_BACKUP_ANNOTATION: "v2"}, {}, Observation())
    assert fields == {"lastVerificationRequest": "v2"}
    assert [reason for _, reason, _ in events] == ["BackupNotConfigured"]


def test_with_backup_verify_each_new_base_backup_is_verified_once(api: FakeApi) -> None:
    """backup.verify: the newest success that took a base backup gets one verification Job; a success from before
    the archive (no base backup) gets none; the same backup is never verified twice."""
    took_one = {"backup": {"lastSuccessfulJob": "db-backup-1", "lastSuccessfulTime": "2026-12-03T02:00:05Z",
                           "lastBaseBackup": "2026-12-03T02:00:05Z"}}
    fields, events = run(verify_on_demand(api, "ns", "db", {}, took_one, WITH_BACKUP, "5Gi", True))
    job_name = names.verification_job("db", "db-backup-1")
    assert fields == {"lastVerificationJob": job_name, "lastVerifiedBackup": "db-backup-1"}
    assert [reason for _, reason, _ in events] == ["VerificationRequested"]
    again = {"backup": {**took_one["backup"], **fields}}
    assert run(verify_on_demand(api, "ns", "db", {}, again, WITH_BACKUP, "5Gi", True)) == (fields, [])
    dump_only = {"backup": {**took_one["backup"], "lastBaseBackup": "2026-12-01T00:00:00Z"}}
    assert run(verify_on_demand(api, "ns", "db", {}, dump_only, WITH_BACKUP, "5Gi", True)) == ({}, [])
    assert run(verify_on_demand(api, "ns", "db", {}, took_one, WITH_BACKUP, "5Gi", False)) == ({}, [])
    assert len(api.jobs) == 1
