"""Two small pure rules: which pod states count as failing (the Degraded phase stands on it), and how
long a database waits after failures in a row."""

from __future__ import annotations

from typing import Any

import pytest

from mydb_operator.model.pods import pod_failure
from mydb_operator.policy.backoff import Backoff, retry_delay


def pod(**state: Any) -> dict[str, Any]:
    return {"metadata": {"name": "db-1"}, "status": {"phase": "Running", "containerStatuses": [
        {"name": "init-ok", "state": {"running": {}}}, {"name": "postgres", "state": state}]}}


@pytest.mark.parametrize("state, told", [
    ({"waiting": {"reason": "CrashLoopBackOff"}}, "db-1: CrashLoopBackOff"),
    ({"waiting": {"reason": "ImagePullBackOff"}}, "db-1: ImagePullBackOff"),
    ({"terminated": {"reason": "Error", "exitCode": 1}}, "db-1: Error"),
    ({"waiting": {"reason": "ContainerCreating"}}, None),  # starting, not failing
    ({"terminated": {"reason": "Completed", "exitCode": 0}}, None),
    ({"running": {}}, None),
])
def test_container_states_that_will_not_fix_themselves_fail_the_pod(state: dict[str, Any], told: str | None) -> None:
    assert pod_failure(pod(**state)) == told


def test_a_first_boot_failing_in_the_init_container_fails_the_pod() -> None:
    """A clone or a restore that keeps failing shows in the init container; the server's waits meanwhile."""
    booting = {"metadata": {"name": "db-1"}, "status": {"phase": "Pending", "initContainerStatuses": [
        {"name": "bootstrap", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}], "containerStatuses": [
        {"name": "postgres", "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    assert pod_failure(booting) == "db-1: CrashLoopBackOff in init container bootstrap"
    booting["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"reason": "Completed", "exitCode": 0}}
    assert pod_failure(booting) is None


def test_a_failed_pod_is_told_by_its_message() -> None:
    failed = {"metadata": {"name": "db-0"}, "status": {"phase": "Failed", "reason": "Evicted",
                                                       "message": "low on ephemeral storage"}}
    assert pod_failure(failed) == "db-0 failed: low on ephemeral storage"


def test_the_wait_doubles_from_5_s_up_to_5_minutes() -> None:
    assert [retry_delay(n) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]


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
