"""policy/major_upgrade.py, reconcile/upgrading.py and desired/upgrade_job.py: the steps of a major upgrade, what
is checked before any pod stops, a newer spec winning over an attempt, and its Job."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from fake_api import FakeApi, FakeHelm, make_runtime, run, statefulset
from kubernetes.client.exceptions import ApiException

from mydb_operator.desired.platform import parse_platform
from mydb_operator.desired.upgrade_job import major_upgrade_job
from mydb_operator.helm.errors import HelmError
from mydb_operator.model.instances import InstanceFacts
from mydb_operator.model.observation import Observation
from mydb_operator.model.spec import parse_spec
from mydb_operator.policy.major_upgrade import (
    FAILED,
    REFUSED,
    STARTING,
    STOPPING,
    SUCCEEDED,
    UPGRADING,
    WAITING,
    UpgradeState,
    known_state,
    next_step,
    upgraded_now,
)
from mydb_operator.policy.upgrade_facts import Facts
from mydb_operator.reconcile.primary_pass import Topology
from mydb_operator.reconcile.upgrading import Upgrade, keep_upgrade
from mydb_operator.status.build import Happened, Wanted, build_status
from mydb_operator.status.warnings import warnings_for

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
    assert step.hold == ("15.2", 2) and step.events == ()
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
    assert step.hold == ("15.2", 0) and [e[1] for e in step.events] == ["MajorUpgradeStarted"]
    assert step.check_job  # the reconcile builds the Job before any pod stops


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
    assert [e[1] for e in done.events] == ["MajorUpgradeSucceeded"]
    assert next_step(SPEC, done.state, new).hold is None  # and nothing more to do


def test_a_failed_job_brings_the_old_major_back_and_waits_for_the_retry_annotation():
    why = "major-upgrade: pg_upgrade --check from PostgreSQL 15 to 17 failed: reg* data types"
    step = next_step(SPEC, state(UPGRADING), facts(pods=(), job=job("Failed"), job_failure=why))
    assert step.state is not None and step.state.phase == FAILED
    assert step.state.message == f"{why}; the pods start again on PostgreSQL 15.2"
    assert step.hold == ("15.2", 2) and [e[:2] for e in step.events] == [("Warning", "MajorUpgradeFailed")]
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
    made = major_upgrade_job(STATEFULSET, "db", "db-upgrade-1", "db-1", "reg/library/postgres:15.2", 256)
    pod_spec = made["spec"]["template"]["spec"]
    [copy], [upgrade] = pod_spec["initContainers"], pod_spec["containers"]
    assert (copy["image"], copy["command"][-1]) == ("reg/library/postgres:15.2", "/scripts/old-binaries.sh")
    assert (upgrade["image"], upgrade["command"][-1]) == ("reg/library/postgres:17.6", "/scripts/major-upgrade.sh")
    assert {e["name"]: e.get("value") for e in upgrade["env"]}.keys() == {"PGDATA", "CREDENTIALS_DIR", "OLD_ROOT",
                                                                          "MIN_FREE_MB"}
    assert {"name": "MIN_FREE_MB", "value": "256"} in upgrade["env"]
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


# --- checked before any pod stops -------------------------------------------------------------------------------

NOT_16 = "PostgreSQL 16 is not offered by this platform, which has images for 15, 17"
ONE_AT_16 = parse_spec({"replicas": 1, "version": "16.4", "storage": "1Gi"})


def one_pod_facts(**changes: Any) -> Facts:
    return facts(**{"pods": (pod("db-0"),), "probes": {"db-0": facts().probes["db-0"]}, **changes})


def test_a_major_the_platform_does_not_offer_is_refused_before_any_pod_stops():
    """The issue's case: one pod at 15.2, spec.version 16.4 on a platform with images for 15 and 17. Before, the
    pods stopped first and the Job could then not be made."""
    step = next_step(ONE_AT_16, None, one_pod_facts(unrunnable=NOT_16))
    assert step.state is not None and step.state.phase == REFUSED and step.hold == ("15.2", 1)
    assert step.state.message == (f"PostgreSQL 15.2 to 16.4 refused before any pod stopped: {NOT_16}; "
                                  "PostgreSQL 15.2 serves on")
    assert step.events == () and not step.check_job  # no MajorUpgradeStarted: nothing stops
    # Even while it waits for its pods: refused at once, not after they are ready.
    assert next_step(ONE_AT_16, None, one_pod_facts(pods=(), unrunnable=NOT_16)).state.phase == REFUSED
    # The platform offers it later (the operator restarted with another config): it goes on by itself.
    assert next_step(ONE_AT_16, step.state, one_pod_facts()).state.phase == STOPPING


def test_the_platforms_refusal_is_made_by_the_pass_and_told_as_a_problem_with_one_warning(api: FakeApi):
    """The reconcile step asks desired/platform.py; status says it as any refused change (phase Failed, Degraded
    True, one Warning) while the pod still serves."""
    platform = parse_platform({"majors": [15, 17]})
    runtime = make_runtime(RenderingHelm(), platform, api=api)
    upgrade = pass_of(runtime, ONE_AT_16, {}, serving(1))
    assert upgrade.state is not None and upgrade.state.phase == REFUSED and upgrade.hold == ("15.2", 1)
    assert NOT_16 in upgrade.state.message and upgrade.events == [] and api.jobs == {}
    status = status_with(upgrade, ONE_AT_16, serving(1))
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (status["phase"], degraded["status"], degraded["reason"]) == ("Failed", "True", "MajorUpgradeRefused")
    assert status["upgrade"]["phase"] == REFUSED and NOT_16 in status["upgrade"]["message"]
    [warning] = warnings_for({}, status)
    assert warning[:2] == ("Warning", "MajorUpgradeRefused") and NOT_16 in warning[2]
    assert warnings_for(status, status_with(upgrade, ONE_AT_16, serving(1), previous=status)) == []  # once


def test_too_little_room_on_the_primarys_volume_as_last_measured_is_refused_before_the_stop():
    step = next_step(SPEC, None, facts(free_mb=100))
    assert step.state is not None and step.state.phase == REFUSED and step.hold == ("15.2", 2)
    assert "db-0's volume has less than 256 MB free beside the data: grow spec.storage first" in step.state.message
    assert next_step(SPEC, None, facts(free_mb=900)).state.phase == STOPPING  # room, or no figures: the Job checks


@pytest.mark.parametrize("render", ["fails", "no bootstrap", "same image"])
def test_an_upgrade_job_that_cannot_be_built_is_refused_before_the_stop(api: FakeApi, render: str):
    """The Job is built from the new major's render before any pod stops: one that cannot be is a refusal, with
    every pod left serving (before, the pods stopped first and waited for it at 0)."""
    helm = RenderingHelm(render)
    upgrade = pass_of(make_runtime(helm, api=api), SPEC, {}, serving(2))
    assert upgrade.state is not None and upgrade.state.phase == REFUSED and upgrade.hold == ("15.2", 2)
    assert "refused before any pod stopped: the upgrade Job cannot be built: " in upgrade.state.message
    assert upgrade.events == [] and api.jobs == {}
    # A render that gives a Job: the stop, announced once.
    ok = pass_of(make_runtime(RenderingHelm(), api=api), SPEC, {}, serving(2))
    assert ok.state is not None and ok.state.phase == STOPPING and ok.hold == ("15.2", 0)
    assert [e[1] for e in ok.events] == ["MajorUpgradeStarted"] and api.jobs == {}


# --- a newer spec wins --------------------------------------------------------------------------------------------

def test_a_spec_back_at_the_running_major_drops_a_waiting_or_refused_attempt():
    back = parse_spec({"replicas": 2, "version": "15.3", "storage": "1Gi"})
    for phase in (WAITING, REFUSED):
        step = next_step(back, state(phase, started_at="", job=""), facts())
        assert step.state is None and step.hold is None  # status.upgrade goes; the spec applies


def test_a_spec_changed_while_the_pods_stop_is_obeyed_at_once():
    """No Job is made yet: the attempt is dropped. A later major starts over with its own checks (here, its pods
    come back first); the running major brings the old pods back at the spec's count."""
    stopping = state(STOPPING, to_version="16.4", job="")
    later = next_step(SPEC, stopping, facts(pods=()))
    assert later.state is not None and (later.state.phase, later.state.to_version) == (WAITING, "17.6")
    assert later.hold == ("15.2", 2) and not later.start_job
    assert [e[1] for e in later.events] == ["MajorUpgradeAbandoned"]
    assert "15.2 to 16.4 abandoned before pg_upgrade ran: spec.version is 17.6 now" in later.events[0][2]
    refused = next_step(SPEC, stopping, facts(unrunnable="no 17 here"))
    assert refused.state is not None and refused.state.phase == REFUSED and refused.hold == ("15.2", 2)
    back = next_step(parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi"}), stopping, facts(pods=()))
    assert back.state is None and back.hold is None


def test_an_upgrading_attempt_whose_job_cannot_be_made_fails_and_the_newer_spec_goes_on(api: FakeApi):
    """The issue's stuck database: Upgrading (an older operator's state), no Job, a platform without 16, and the
    spec moved on to 17. The Job is made again or the attempt fails: the old major comes back at the spec's count,
    and the next pass takes up 17 (no retry annotation needed), instead of the pods left at 0."""
    platform = parse_platform({"majors": [15, 17]})
    runtime = make_runtime(RenderingHelm(), platform, api=api)
    stuck = state(UPGRADING, to_version="16.4", job="db-upgrade-1",
                  message="the upgrade Job could not be made: spec.version: " + NOT_16)
    upgrade = pass_of(runtime, SPEC, {"upgrade": stuck.as_status()}, Observation(statefulset=statefulset(replicas=0)))
    assert upgrade.state is not None and upgrade.state.phase == FAILED and upgrade.hold == ("15.2", 2)
    assert upgrade.state.message.startswith(f"the upgrade Job could not be made: spec.version: {NOT_16}")
    assert upgrade.state.message.endswith("; the pods start again on PostgreSQL 15.2") and api.jobs == {}
    assert [e[:2] for e in upgrade.events] == [("Warning", "MajorUpgradeFailed")]
    later = next_step(SPEC, upgrade.state, facts())
    assert later.state is not None and (later.state.phase, later.state.to_version) == (STOPPING, "17.6")


def test_a_job_the_api_refuses_fails_the_attempt_and_one_it_cannot_reach_is_tried_again(api: FakeApi):
    runtime = make_runtime(RenderingHelm(), api=api)
    stopping = {"upgrade": state(STOPPING, job="").as_status()}
    api.failing["create_job_once"] = ApiException(status=403, reason="Forbidden")
    refused = pass_of(runtime, SPEC, stopping, Observation(statefulset=statefulset(replicas=0)))
    assert refused.state is not None and refused.state.phase == FAILED and refused.hold == ("15.2", 2)
    assert "the upgrade Job could not be made: the API refused it: Forbidden" in refused.state.message
    api.failing["create_job_once"] = ApiException(status=503, reason="Unavailable")
    later = pass_of(runtime, SPEC, stopping, Observation(statefulset=statefulset(replicas=0)))
    assert later.state is not None and later.state.phase == STOPPING and later.hold == ("15.2", 0)
    assert "could not be created: Unavailable" in later.state.message
    del api.failing["create_job_once"]
    made = pass_of(runtime, SPEC, stopping, Observation(statefulset=statefulset(replicas=0)))
    assert made.state is not None and made.state.phase == UPGRADING and list(api.jobs) == [("ns", made.state.job)]


def test_once_the_job_runs_its_outcome_comes_first_and_the_newer_spec_right_after():
    """pg_upgrade --link cannot be stopped half way: a spec changed meanwhile waits for the Job's outcome."""
    at_16 = state(UPGRADING, to_version="16.4")
    assert next_step(SPEC, at_16, facts(pods=(), job=job("Running"))).hold == ("15.2", 0)
    upgraded = next_step(SPEC, at_16, facts(pods=(), job=job("Complete")))
    assert upgraded.state is not None and upgraded.state.phase == STARTING
    assert upgraded.hold == ("16.4", 2)  # the data is 16 now: 16 starts, 17 upgrades from there
    failed = next_step(SPEC, at_16, facts(pods=(), job=job("Failed"), job_failure="why"))
    assert failed.state is not None and failed.state.phase == FAILED and failed.hold == ("15.2", 2)
    again = next_step(SPEC, failed.state, facts())  # another version than the failed one: no retry annotation
    assert again.state is not None and (again.state.phase, again.state.to_version) == (STOPPING, "17.6")


def test_failed_puts_the_old_version_back_at_the_specs_count_once_the_jobs_pod_has_ended():
    """A Job marked failed while its pod still stops (FailureTarget) keeps the pods down: the volume is not
    free yet. Once it ended, the old version at the spec's replicas."""
    ending = job("FailureTarget")
    ending["status"]["active"] = 1
    waiting = next_step(SPEC, state(UPGRADING), facts(pods=(), job=ending, job_failure="why"))
    assert waiting.state is not None and waiting.state.phase == UPGRADING and waiting.hold == ("15.2", 0)
    assert waiting.events == ()
    ended = next_step(SPEC, state(UPGRADING), facts(pods=(), job=job("FailureTarget"), job_failure="why"))
    assert ended.state is not None and ended.state.phase == FAILED and ended.hold == ("15.2", 2)


# --- status while nothing serves -----------------------------------------------------------------------------------

def test_status_with_no_pod_serving_for_an_upgrade_is_never_healthy():
    down = Observation(statefulset=statefulset(replicas=0))
    for phase in (STOPPING, UPGRADING, STARTING, FAILED):
        status = status_with(Upgrade(state(phase)), SPEC, down)
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert degraded["reason"] != "Healthy" and degraded["message"] != "no failures", (phase, degraded)
    stopped = status_with(Upgrade(state(UPGRADING)), SPEC, down)
    degraded = next(c for c in stopped["conditions"] if c["type"] == "Degraded")
    assert (degraded["reason"], degraded["message"]) == ("MajorUpgrade", "m")
    # Once a pod serves again, Healthy.
    back = status_with(Upgrade(state(FAILED)), SPEC, serving(2))
    assert next(c for c in back["conditions"] if c["type"] == "Degraded")["reason"] == "Healthy"


# --- helpers -------------------------------------------------------------------------------------------------------

class RenderingHelm(FakeHelm):
    """`helm template` of the database's StatefulSet at the values' version: BROKEN says how it fails."""

    def __init__(self, broken: str = "") -> None:
        super().__init__()
        self.broken = broken

    async def template(self, namespace: str, release: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        if self.broken == "fails":
            raise HelmError("objectPatches[0] does not apply to StatefulSet db")
        rendered = copy.deepcopy(STATEFULSET)
        bootstrap = rendered["spec"]["template"]["spec"]["initContainers"][0]
        bootstrap["image"] = f"postgres:{values['image']['tag']}"
        if self.broken == "no bootstrap":
            bootstrap["name"] = "init"
        if self.broken == "same image":  # a platform that pins one image for every major
            bootstrap["image"] = "postgres:15.2"
        return [{"kind": "Service", "metadata": {"name": "db"}}, {"kind": "StatefulSet", **rendered}]


def serving(count: int) -> Observation:
    return Observation(statefulset=statefulset(replicas=count), pods=[pod(f"db-{n}") for n in range(count)])


PROBES = facts().probes


def pass_of(runtime: Any, spec: Any, previous: dict[str, Any], observed: Observation) -> Upgrade:
    topology = Topology(probes={k: v for k, v in PROBES.items() if k in {p["metadata"]["name"] for p in observed.pods}})
    return run(keep_upgrade("ns", "db", spec, {}, previous, observed, topology, runtime))


def status_with(upgrade: Upgrade, spec: Any, observed: Observation, previous: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    applied = {"name": "db", "revision": 1, "chart": "mydatabase-0.1.0", "appliedHash": "h", "status": "deployed"}
    return build_status(Wanted("db", "ns", 2, spec), Happened(observed, applied=applied, upgrade=upgrade.state),
                        previous=previous or {}, now=NOW)
