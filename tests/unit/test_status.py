"""build_status, drift and status_patch: phases, conditions and writes follow only the facts."""

from mydb_operator.desired.values import build_values
from mydb_operator.model.observation import Observation
from mydb_operator.model.spec import parse_spec
from mydb_operator.policy.drift import drift
from mydb_operator.status.build import Happened, Wanted, build_status
from mydb_operator.status.patch import PROGRESS_HOLD_SECONDS, hold_for, progress_only, status_patch
from mydb_operator.status.problem import Problem

SPEC = parse_spec({"replicas": 3, "version": "15.2", "storage": "1Gi", "backup": {"schedule": "0 2 * * *"}})
APPLIED = {"name": "db", "revision": 1, "chart": "mydatabase-0.1.0", "appliedHash": "h", "status": "deployed"}
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
ROUTES = {"db": ("db-0",), "db-ro": ("db-1", "db-2")}  # where the Services route once all three serve


def pod(ordinal, ready=True, phase="Running", labels=None):
    return {
        "metadata": {"name": f"db-{ordinal}", "labels": labels or {}},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def statefulset(replicas=3, updated=3, current="r1", update="r1"):
    return {"metadata": {"generation": 2}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 2, "updatedReplicas": updated,
                       "currentRevision": current, "updateRevision": update}}


def status_of(observation, *, spec=SPEC, applied=APPLIED, problem=None, previous=None, now=T0):
    return build_status(Wanted("db", "ns", 4, spec), Happened(observation, applied=applied, problem=problem),
                        previous=previous or {}, now=now)


def cond(status, type_):
    return next(c for c in status["conditions"] if c["type"] == type_)


def serving_three():
    return Observation(statefulset=statefulset(), pods=[pod(0), pod(1), pod(2)], routes=ROUTES)


def test_all_replicas_ready_and_routed_is_running_and_ready():
    status = status_of(serving_three())
    assert (status["phase"], status["ready"], status["readyReplicas"]) == ("Running", True, 3)
    assert cond(status, "Ready")["status"] == "True"
    assert cond(status, "Progressing")["status"] == "False"
    assert status["observedGeneration"] == 4
    assert status["primary"] == status["targetPrimary"] == "db-0"
    assert (cond(status, "Failover")["status"], cond(status, "Failover")["reason"]) == ("False", "Stable")
    assert status["endpoints"] == {"primary": "db.ns.svc:5432", "replicas": "db-ro.ns.svc:5432"}
    assert status["release"] == APPLIED
    assert status["selector"] == "app.kubernetes.io/instance=db,app.kubernetes.io/name=mydatabase"


def test_partial_readiness_is_deploying():
    status = status_of(Observation(statefulset=statefulset(), pods=[pod(0), pod(1, ready=False)]))
    assert (status["phase"], status["ready"], status["readyReplicas"]) == ("Deploying", False, 1)
    assert cond(status, "Progressing")["status"] == "True"
    assert "1/3" in status["message"]


def test_rollout_in_progress_is_not_ready_even_if_pods_are():
    observation = Observation(statefulset=statefulset(update="r2", updated=1), pods=[pod(0), pod(1), pod(2)])
    assert status_of(observation)["phase"] == "Deploying"


def test_failed_pod_is_degraded():
    status = status_of(Observation(statefulset=statefulset(), pods=[pod(0), pod(1), pod(2, ready=False, phase="Failed")]))
    assert status["phase"] == "Degraded"
    assert cond(status, "Degraded")["status"] == "True"
    assert "db-2 failed" in cond(status, "Degraded")["message"]


def test_problem_is_failed_with_reason():
    status = status_of(Observation(), problem=Problem("HelmFailed", "boom"))
    assert (status["phase"], status["ready"]) == ("Failed", False)
    assert cond(status, "Ready")["reason"] == "HelmFailed"
    assert cond(status, "Degraded")["message"] == "boom"


def test_before_first_release_is_pending():
    assert status_of(Observation(), applied=None)["phase"] == "Pending"


def test_hibernated_keeps_replicas_in_spec_and_reports_hibernated():
    spec = parse_spec({"replicas": 3, "version": "15.2", "storage": "1Gi", "hibernate": True})
    status = status_of(Observation(statefulset=statefulset(replicas=0, updated=0)), spec=spec)
    assert (status["phase"], status["ready"]) == ("Hibernated", False)
    assert cond(status, "Ready")["reason"] == "Hibernated"


def test_ready_pods_the_services_do_not_route_to_yet_are_not_ready():
    """A client connecting right after Ready must land where it should: Ready waits for the Services."""
    for routes, missing in (({}, "Service db to route to db-0"),
                            ({"db": ("db-0",), "db-ro": ("db-1",)}, "Service db-ro to route to db-1, db-2"),
                            ({"db": ("db-0", "db-1"), "db-ro": ("db-2",)}, "Service db to route to db-0")):
        status = status_of(Observation(statefulset=statefulset(), pods=[pod(0), pod(1), pod(2)], routes=routes))
        assert (status["phase"], status["ready"]) == ("Deploying", False)
        assert cond(status, "Ready")["reason"] == "RoutingPending" and missing in status["message"], status["message"]


def test_transition_time_kept_while_status_unchanged_and_no_patch_needed():
    observation = serving_three()
    first = status_of(observation, now=T0)
    second = status_of(observation, previous=first, now=T1)
    assert cond(second, "Ready")["lastTransitionTime"] == T0
    assert status_patch(first, second) is None


def test_transition_time_moves_when_status_flips():
    first = status_of(serving_three(), now=T0)
    second = status_of(Observation(statefulset=statefulset(), pods=[pod(0)]), previous=first, now=T1)
    assert cond(second, "Ready")["lastTransitionTime"] == T1
    assert status_patch(first, second)["ready"] is False


def test_status_patch_nulls_nested_dropped_keys_too():
    """A merge patch keeps a nested key it does not name: the archive's stalledSince stayed after it streamed again."""
    before = {"backup": {"archive": {"streaming": False, "stalledSince": T0}, "lastSuccessfulTime": T0}}
    after = {"backup": {"archive": {"streaming": True}, "lastSuccessfulTime": T0}}
    assert status_patch(before, after) == {
        "backup": {"archive": {"streaming": True, "stalledSince": None}, "lastSuccessfulTime": T0}}


def test_status_patch_nulls_dropped_keys_and_ignores_kopf():
    assert status_patch({"phase": "Running", "backup": {"x": 1}, "kopf": {}}, {"phase": "Running"}) == {
        "phase": "Running", "backup": None}


def test_backup_facts_from_cronjob_and_failed_jobs():
    failed_job = {"metadata": {"name": "db-backup-1"},
                  "status": {"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": T1}]}}
    observation = Observation(cronjob={"status": {"lastScheduleTime": T0, "lastSuccessfulTime": T0}}, jobs=[failed_job])
    assert status_of(observation)["backup"] == {
        "lastScheduleTime": T0, "lastSuccessfulTime": T0, "lastFailedTime": T1, "lastFailedJob": "db-backup-1"}


def test_a_stalled_archive_turns_backup_healthy_false_30_s_after_the_primary_last_saw_it():
    """status.backup.archive comes from the primary's answer; without the archive's walsender for 30 s,
    BackupHealthy is False (ArchiveStalled), though the last backup Job succeeded."""
    from mydb_operator.model.instances import InstanceFacts, Standby
    from mydb_operator.status.primary import PrimaryView

    def seen(*standbys):
        facts = InstanceFacts(pod="db-0", in_recovery=False, timeline=1, wal_lsn=0x3000000, standbys=standbys)
        return PrimaryView(probes={"db-0": facts})

    observation = Observation(statefulset=statefulset(), pods=[pod(0), pod(1), pod(2)], routes=ROUTES,
                              cronjob={"status": {"lastSuccessfulTime": T0}})
    streaming = build_status(Wanted("db", "ns", 4, SPEC), Happened(observation, applied=APPLIED, problem=None,
                             primary=seen(Standby("mydb-archive", "streaming", "async", 0x3000000, None, 1.0))),
                             previous={}, now=T0)
    assert streaming["backup"]["archive"] == {"streaming": True, "archivedWAL": "0/3000000", "lagBytes": 0,
                                              "since": T0, "timeline": 1}
    assert cond(streaming, "BackupHealthy")["reason"] == "BackupSucceeded"
    assert (streaming["backup"]["firstRecoverablePoint"], streaming["backup"]["lastBaseBackup"]) == (T0, T0)
    gone = build_status(Wanted("db", "ns", 4, SPEC), Happened(observation, applied=APPLIED, problem=None,
                        primary=seen()), previous=streaming, now=T0)
    assert gone["backup"]["archive"]["stalledSince"] == T0
    assert cond(gone, "BackupHealthy")["status"] == "True"
    later = build_status(Wanted("db", "ns", 4, SPEC), Happened(observation, applied=APPLIED, problem=None,
                         primary=seen()), previous=gone, now=T1)
    assert (cond(later, "BackupHealthy")["status"], cond(later, "BackupHealthy")["reason"]) == ("False", "ArchiveStalled")
    dumps_only = parse_spec({"replicas": 3, "version": "15.2", "storage": "1Gi",
                             "backup": {"schedule": "0 2 * * *", "continuous": False}})
    assert "archive" not in status_of(observation, spec=dumps_only)["backup"]


def test_drift_detects_missing_and_edited_children():
    values = build_values("db", SPEC)
    services = ["db", "db-ro", "db-headless"]
    cron = {"spec": {"schedule": "0 2 * * *"}}
    healthy = Observation(statefulset=statefulset(), services=services, cronjob=cron)
    assert drift(SPEC, values, healthy, "db") is None
    assert "StatefulSet is missing" in drift(SPEC, values, Observation(services=services, cronjob=cron), "db")
    assert "db-ro" in drift(SPEC, values, Observation(statefulset=statefulset(), services=["db", "db-headless"],
                                                      cronjob=cron), "db")
    assert "CronJob is missing" in drift(SPEC, values, Observation(statefulset=statefulset(), services=services), "db")
    scaled = Observation(statefulset=statefulset(replicas=1), services=services, cronjob=cron)
    assert "1 replicas instead of 3" in drift(SPEC, values, scaled, "db")


def test_pods_coming_up_one_by_one_are_progress_and_ready_is_a_transition():
    def roll(*pods):
        return status_of(Observation(statefulset=statefulset(), pods=list(pods)), previous=first, now=T1)
    first = status_of(Observation(statefulset=statefulset()))  # just installed: no pod yet
    steps = [roll(pod(0, ready=False)), roll(pod(0)), roll(pod(0), pod(1, ready=False)),
             roll(pod(0), pod(1), pod(2, ready=False))]
    assert all(progress_only(first, step) for step in steps)
    assert not progress_only(first, status_of(serving_three(), previous=first, now=T1))  # Running and Ready
    assert not progress_only(first, status_of(Observation(statefulset=statefulset()), applied={**APPLIED, "revision": 2}))


def test_a_progress_change_waits_at_most_the_hold_and_a_transition_never():
    first = status_of(Observation(statefulset=statefulset()))
    progress = status_of(Observation(statefulset=statefulset(), pods=[pod(0)]), previous=first)
    ready = status_of(serving_three(), previous=first)
    assert hold_for(first, progress, held_since=None, now=100.0) == PROGRESS_HOLD_SECONDS
    assert hold_for(first, progress, held_since=100.0, now=105.0) == PROGRESS_HOLD_SECONDS - 5
    assert hold_for(first, progress, held_since=100.0, now=100.0 + PROGRESS_HOLD_SECONDS) is None
    assert hold_for(first, ready, held_since=None, now=100.0) is None


def test_a_claim_still_being_provisioned_is_not_resizing():
    def claim(name, capacity=None):
        return {"metadata": {"name": name}, "status": {"capacity": {"storage": capacity}} if capacity else {}}
    creating = status_of(Observation(statefulset=statefulset(), claims=[claim("data-db-0", "1Gi"), claim("data-db-1")]))
    assert cond(creating, "Resizing")["status"] == "False"
    growing = status_of(Observation(statefulset=statefulset(), claims=[claim("data-db-0", "512Mi"), claim("data-db-1")]))
    assert cond(growing, "Resizing")["status"] == "True" and "waiting for data-db-0" in cond(growing, "Resizing")["message"]


def test_a_primary_down_or_moving_is_degraded_or_progressing_whatever_the_pods():
    from mydb_operator.policy.actions import Plan
    from mydb_operator.status.primary import PrimaryView

    def under(state, message):
        return build_status(Wanted("db", "ns", 4, SPEC), Happened(serving_three(), applied=APPLIED, problem=None,
                            primary=PrimaryView(plan=Plan((), state, message))), previous={}, now=T0)
    for state in ("WaitingFailoverDelay", "FailingOver", "NoEligibleReplica"):
        status = under(state, "the primary db-0 is not ready")
        assert (status["phase"], status["ready"], cond(status, "Ready")["reason"]) == ("Degraded", False, state)
    moving = under("FailingOver", "failing over from db-0 to db-1")
    assert (cond(moving, "Failover")["status"], cond(moving, "Failover")["reason"]) == ("True", "FailingOver")
    stuck = under("NoEligibleReplica", "no replica can take over: db-1 is not ready")
    assert cond(stuck, "Failover")["status"] == "False" and "db-1 is not ready" in cond(stuck, "Failover")["message"]
    switching = under("SwitchingOver", "switching over from db-0 to db-1")
    assert (switching["phase"], cond(switching, "Failover")["status"]) == ("Deploying", "True")


def test_under_on_delete_the_operator_restarts_and_updated_replicas_say_rolled_out():
    """The controller never moves currentRevision on under OnDelete."""
    on_delete = statefulset(current="r1", update="r2")
    on_delete["spec"]["updateStrategy"] = {"type": "OnDelete"}
    assert status_of(Observation(statefulset=on_delete, pods=[pod(0), pod(1), pod(2)], routes=ROUTES))["phase"] == (
        "Running")
    rolling = statefulset(current="r1", update="r2")
    assert status_of(Observation(statefulset=rolling, pods=[pod(0), pod(1), pod(2)], routes=ROUTES))["phase"] == (
        "Deploying")


def test_a_failing_pod_says_why_in_its_own_words_without_the_log_lines_time():
    """The last log lines a failed container left (FallbackToLogsOnError) give status the reason: PostgreSQL's
    FATAL line, or a restore's refusal with the window."""
    from mydb_operator.model.pods import last_words, pod_failure
    fatal = ("2026-12-03 11:52:02.393 GMT [19414] LOG:  starting PostgreSQL 15.2\n"
             "2026-12-03 11:52:02.393 GMT [19414] FATAL:  invalid value for parameter \"shared_buffers\": \"lots\"\n"
             "2026-12-03 11:52:02.394 GMT [19414] LOG:  database system is shut down\n")
    assert last_words(fatal) == 'FATAL:  invalid value for parameter "shared_buffers": "lots"'
    # The server's start: the parameter and value come in a LOG line before the FATAL one that names the file.
    started = ('2026-12-03 17:36:01.101 UTC [1] LOG:  invalid value for parameter "shared_buffers": "lots"\n'
               '2026-12-03 17:36:01.102 UTC [1] FATAL:  configuration file "/data/pgdata/chart.conf" contains errors\n')
    assert last_words(started) == ('FATAL:  configuration file "/data/pgdata/chart.conf" contains errors: '
                                   'invalid value for parameter "shared_buffers": "lots"')
    refused = ("recover: pointInTime 2001-01-01T00:00:00Z is before the first recoverable point; the archive "
               "recovers from 2026-12-03T02:00:05Z to about 2026-12-03T12:00:00Z\n"
               "primary-init: recovery failed; /var/lib/postgresql/data/pgdata stays empty and the next start tries again\n")
    assert last_words(refused).startswith("recover: pointInTime 2001-01-01T00:00:00Z is before the first")
    crashing = {"metadata": {"name": "db-0"}, "status": {"initContainerStatuses": [{
        "name": "bootstrap", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"reason": "Error", "message": fatal}}}]}}
    assert pod_failure(crashing) == ('db-0: init container bootstrap keeps failing: '
                                     'FATAL:  invalid value for parameter "shared_buffers": "lots"')


def test_status_image_is_the_deployed_reference_digest_and_all():
    pinned = "127.0.0.1:16400/library/postgres:15.2@sha256:" + "a" * 64
    deployed = statefulset()
    deployed["spec"]["template"] = {"spec": {"containers": [{"name": "postgres", "image": pinned}]}}
    assert status_of(Observation(statefulset=deployed, pods=[pod(0)]))["image"] == pinned
    assert "image" not in status_of(Observation(statefulset=statefulset(), pods=[pod(0)]))
