"""Two small pure rules: which pod states count as failing (the Degraded phase stands on it), and how
long a database waits after failures in a row."""

from __future__ import annotations

from typing import Any

import pytest

from mydb_operator.model.pods import pod_failure
from mydb_operator.policy.backoff import Backoff, retry_delay


def pod(**state: Any) -> dict[str, Any]:
    return {"metadata": {"name": "db-1"}, "status": {"phase": "Running", "containerStatuses": [
        {"name": "init-ok", "state": {"running": {}}},
        {"name": "postgres", "image": "registry:5000/library/postgres:15.9", "state": state}]}}


@pytest.mark.parametrize("state, told", [
    # The kubelet's retries do not change the words: one failure, one Warning.
    ({"waiting": {"reason": "CrashLoopBackOff"}}, "db-1: postgres keeps failing"),
    ({"terminated": {"reason": "Error", "exitCode": 1}}, "db-1: postgres keeps failing"),
    ({"waiting": {"reason": "ImagePullBackOff"}}, "db-1: postgres cannot pull its image "
                                                   "registry:5000/library/postgres:15.9"),
    ({"waiting": {"reason": "ErrImagePull"}}, "db-1: postgres cannot pull its image "
                                               "registry:5000/library/postgres:15.9"),
    ({"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "db-credentials" not found'}},
     'db-1: postgres cannot start: secret "db-credentials" not found'),
    ({"waiting": {"reason": "ContainerCreating"}}, None),  # starting, not failing
    ({"terminated": {"reason": "Completed", "exitCode": 0}}, None),
    ({"running": {}}, None),
])
def test_container_states_that_will_not_fix_themselves_fail_the_pod(state: dict[str, Any], told: str | None) -> None:
    assert pod_failure(pod(**state)) == told


def test_a_crashing_server_between_two_back_offs_is_still_failing_in_the_same_words() -> None:
    """The kubelet restarts it, it runs for a second, it crashes again: one failure, one Warning. Once the
    restarted server is ready, it no longer fails."""
    crashed = {"terminated": {"reason": "Error", "exitCode": 1, "message": "FATAL:  bad value"}}
    failing = pod(running={"startedAt": "2026-12-03T22:32:33Z"})
    container = failing["status"]["containerStatuses"][1]
    container.update(lastState=crashed, ready=False, restartCount=2)
    assert pod_failure(failing) == "db-1: postgres keeps failing: FATAL:  bad value"
    container["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    assert pod_failure(failing) == "db-1: postgres keeps failing: FATAL:  bad value"
    container.update(state={"running": {}}, ready=True)
    assert pod_failure(failing) is None
    container.update(ready=False, lastState={"terminated": {"reason": "Completed", "exitCode": 0}})
    assert pod_failure(failing) is None  # a clean restart (a switchover's) is starting, not failing


def test_a_first_boot_failing_in_the_init_container_fails_the_pod() -> None:
    """A clone or a restore that keeps failing shows in the init container; the server's waits meanwhile."""
    booting = {"metadata": {"name": "db-1"}, "status": {"phase": "Pending", "initContainerStatuses": [
        {"name": "bootstrap", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}], "containerStatuses": [
        {"name": "postgres", "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    assert pod_failure(booting) == "db-1: init container bootstrap keeps failing"
    booting["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"reason": "Completed", "exitCode": 0}}
    assert pod_failure(booting) is None


def test_a_pod_no_node_takes_is_told_by_the_schedulers_reason() -> None:
    """Without the node counts, which change as nodes come and go (a new Warning each time otherwise); claims
    still being bound are no failure (seen on every new database: the provisioner binds them in seconds)."""
    why = ("0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector. "
           "no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption is not helpful for "
           "scheduling.")
    pending = {"metadata": {"name": "db-0"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}]}}
    assert pod_failure(pending) == ("db-0 cannot be scheduled: Insufficient cpu; "
                                    "node(s) didn't match Pod's node affinity/selector")
    pending["status"]["conditions"][0]["message"] = why.replace("0/4", "0/9").replace("3 node(s)", "8 node(s)")
    assert pod_failure(pending) == ("db-0 cannot be scheduled: Insufficient cpu; "
                                    "node(s) didn't match Pod's node affinity/selector")
    pending["status"]["conditions"][0]["message"] = ("0/4 nodes are available: pod has unbound immediate "
                                                     "PersistentVolumeClaims. not found")
    assert pod_failure(pending) is None
    # Seen in CI: the scheduler ran before its cache had the claim the StatefulSet controller had just made.
    pending["status"]["conditions"][0]["message"] = 'persistentvolumeclaim "data-db-0" not found'
    assert pod_failure(pending) is None
    pending["status"]["conditions"][0]["message"] = 'persistentvolumeclaim "data-db-0" is being deleted'
    assert pod_failure(pending) == 'db-0 cannot be scheduled: persistentvolumeclaim "data-db-0" is being deleted'
    pending["status"]["conditions"][0].update(status="True", reason="", message="")
    assert pod_failure(pending) is None


def test_a_failed_pod_is_told_by_its_message() -> None:
    failed = {"metadata": {"name": "db-0"}, "status": {"phase": "Failed", "reason": "Evicted",
                                                       "message": "low on ephemeral storage"}}
    assert pod_failure(failed) == "db-0 failed: low on ephemeral storage"


def test_the_wait_doubles_from_5_s_up_to_5_minutes() -> None:
    assert [retry_delay(n) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]


@pytest.mark.parametrize("reason", ["CredentialsMissing", "CredentialsInvalid", "StorageClassNotFound",
                                    "RestoreSourceMissing"])
def test_a_problem_a_user_fixes_is_looked_at_again_at_least_every_resync(reason: str) -> None:
    """One read per look: a user who makes the Secret (the StorageClass, the source) after ten minutes waits
    a resync at most, not the 300 s the back-off has grown to. The reasons are those test_acting.py sees."""
    from mydb_operator.policy.backoff import problem_retry_delay

    assert problem_retry_delay(reason, backed_off=300, resync=60) == 60
    assert problem_retry_delay(reason, backed_off=5, resync=60) == 5
    assert problem_retry_delay("HelmFailed", backed_off=300, resync=60) == 300  # an API refusal backs off


def test_a_namespace_being_deleted_is_looked_at_again_after_the_first_step_however_many_passes_failed() -> None:
    """Events woke the daemon into four failed passes in two seconds as the namespace controller deleted the pods:
    the fifth look came 40 s later, and the namespace stayed Terminating that long (an e2e run's last minute)."""
    from mydb_operator.policy.backoff import problem_retry_delay

    backoff = Backoff()
    waits = [problem_retry_delay("NamespaceDeleting", backoff.failed(), resync=60) for _ in range(6)]
    assert waits == [5, 5, 5, 5, 5, 5]
    assert problem_retry_delay("HelmFailed", backoff.failed(), resync=60) == 300


def test_a_success_starts_the_count_again() -> None:
    backoff = Backoff()
    assert [backoff.failed() for _ in range(3)] == [5, 10, 20]
    backoff.succeeded()
    assert backoff.failed() == 5


def test_a_broken_watch_lists_again_after_2_s_doubling_up_to_30_s() -> None:
    """The informers count with the same policy, from 2 s up to 30 s."""
    from mydb_operator.cluster.informers import RELIST_CEILING, RELIST_FIRST

    backoff = Backoff(first=RELIST_FIRST, ceiling=RELIST_CEILING)
    assert [backoff.failed() for _ in range(6)] == [2, 4, 8, 16, 30, 30]


def test_a_jobs_pod_is_told_by_the_last_words_of_the_container_that_failed() -> None:
    """The upgrade Job's reason in status: major-upgrade.sh's own line, not prefixed twice with its name."""
    from mydb_operator.model.pods import failed_words

    said = "Checking...\nmajor-upgrade: pg_upgrade --check from PostgreSQL 15 to 17 failed: reg* (public.refs.f)\n"
    pod_ = {"status": {"initContainerStatuses": [
        {"name": "old-binaries", "state": {"terminated": {"exitCode": 0, "message": "copied"}}}],
        "containerStatuses": [{"name": "major-upgrade", "state": {"terminated": {"exitCode": 1, "message": said}}}]}}
    assert failed_words(pod_) == "major-upgrade: pg_upgrade --check from PostgreSQL 15 to 17 failed: reg* (public.refs.f)"
    pod_["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "initdb: error: could not create\n"
    assert failed_words(pod_) == "major-upgrade: initdb: error: could not create"
    assert failed_words({"status": {}}) == ""
