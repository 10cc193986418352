"""On-demand backup requests and backup health, as pure functions."""

from mydb_operator import names
from mydb_operator.desired.backup_job import on_demand_job
from mydb_operator.policy import backups

T1, T2, T3 = "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z"
CRONJOB = {
    "metadata": {"name": "db-backup", "namespace": "ns", "uid": "u-1"},
    "spec": {"jobTemplate": {"metadata": {"labels": {"app.kubernetes.io/instance": "db"}},
                             "spec": {"backoffLimit": 1, "template": {"spec": {"containers": [{"name": "backup"}]}}}}},
    "status": {"lastScheduleTime": T1, "lastSuccessfulTime": T1},
}


def job(name, kind=None, at=None):
    conditions = [{"type": kind, "status": "True", "lastTransitionTime": at}] if kind else []
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def test_a_request_is_new_until_recorded_in_status():
    annotations = {names.BACKUP_NOW_ANNOTATION: "now-1"}
    assert backups.requested(annotations, {}) == "now-1"
    assert backups.requested(annotations, {"backup": {"lastOnDemandRequest": "now-1"}}) is None
    assert backups.requested(annotations, {"backup": {"lastOnDemandRequest": "now-0"}}) == "now-1"
    assert backups.requested({}, {}) is None


def test_on_demand_job_copies_the_cronjob_template_and_is_owned_by_it():
    made = on_demand_job(CRONJOB, "db", "now-1")
    assert made["metadata"]["name"].startswith("db-backup-") and len(made["metadata"]["name"]) == len("db-backup-") + 8
    assert made["spec"] == CRONJOB["spec"]["jobTemplate"]["spec"]
    assert made["metadata"]["labels"]["app.kubernetes.io/instance"] == "db"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert on_demand_job(CRONJOB, "db", "now-1")["metadata"]["name"] == made["metadata"]["name"]
    assert on_demand_job(CRONJOB, "db", "now-2")["metadata"]["name"] != made["metadata"]["name"]


def test_facts_take_the_newest_of_cronjob_and_jobs():
    found = backups.facts(CRONJOB, [job("a", "Complete", T2), job("b", "Failed", T3), job("c")])
    assert found == {"lastScheduleTime": T1, "lastSuccessfulTime": T2, "lastSuccessfulJob": "a",
                     "lastFailedTime": T3, "lastFailedJob": "b"}


def test_a_major_upgrades_job_is_no_backup():
    """Seen in the e2e run: a refused pg_upgrade --check turned BackupHealthy False with "the last backup failed"."""
    upgrade = job("db-upgrade-1", "Failed", T3)
    upgrade["metadata"]["labels"] = {names.COMPONENT_LABEL: names.MAJOR_UPGRADE_COMPONENT}
    assert backups.facts(CRONJOB, [job("a", "Complete", T2), upgrade]) == {
        "lastScheduleTime": T1, "lastSuccessfulTime": T2, "lastSuccessfulJob": "a"}


def test_health_is_false_only_while_the_last_backup_failed():
    assert backups.health({})[:2] == (True, "NoBackupYet")
    assert backups.health({"lastSuccessfulTime": T2})[:2] == (True, "BackupSucceeded")
    failed = backups.health({"lastSuccessfulTime": T1, "lastFailedTime": T2, "lastFailedJob": "b"})
    assert failed[:2] == (False, "BackupFailed") and "Job b" in failed[2]
    assert backups.health({"lastSuccessfulTime": T3, "lastFailedTime": T2, "lastFailedJob": "b"})[0] is True


def test_after_a_major_upgrade_the_old_archive_is_listed_apart_and_the_new_one_starts_empty():
    previous = {"ready": False, "backup": {
        "lastSuccessfulJob": "db-backup-1", "lastSuccessfulTime": "2026-12-01T02:00:00Z",
        "firstBackupJob": "db-backup-first-15", "lastBaseBackup": "2026-12-01T02:00:00Z",
        "baseBackups": ["2026-11-30T02:00:00Z", "2026-12-01T02:00:00Z"],
        "firstRecoverablePoint": "2026-11-30T02:00:00Z", "archive": {"since": "2026-11-29T10:00:00Z"}}}
    after = backups.for_a_new_major(previous, "15.2", "2026-12-03T18:00:00Z")
    backup = after["backup"]
    assert backup["earlierMajors"] == [{"major": 15, "directory": "postgresql-15", "until": "2026-12-03T18:00:00Z",
                                        "baseBackups": ["2026-11-30T02:00:00Z", "2026-12-01T02:00:00Z"],
                                        "firstRecoverablePoint": "2026-11-30T02:00:00Z"}]
    for gone in ("archive", "baseBackups", "firstRecoverablePoint", "lastBaseBackup", "firstBackupJob"):
        assert gone not in backup, gone
    assert backup["lastSuccessfulJob"] == "db-backup-1"  # the Jobs' history goes on
    # A second upgrade adds its major; the same one again replaces its entry.
    later = backups.for_a_new_major(after, "17.6", "2027-06-01T00:00:00Z")["backup"]["earlierMajors"]
    assert [e["major"] for e in later] == [15, 17] and "baseBackups" not in later[1]
    assert previous["backup"]["baseBackups"]  # the status it was given is left as it was
