"""Leader election: scopes and their overlap, the Lease that stops a second instance, /healthz of a standby."""

from __future__ import annotations

import copy
import datetime
import logging
import os
import re
import socket
import time
import urllib.request
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from mydb_operator import cli, names
from mydb_operator.commands import leader_election, run
from mydb_operator.commands.settings import load
from mydb_operator.config import Config
from mydb_operator.leadership import identity, standby_health
from mydb_operator.leadership import lease as election
from mydb_operator.leadership.conflicts import LeaseView, ScopeConflict, conflict_message, conflicting_lease
from mydb_operator.leadership.identity import choose_lease_namespace
from mydb_operator.leadership.lease import LeaderLease
from mydb_operator.leadership.scopes import describe_scope, globs_overlap, parse_scope, scope_of, scopes_overlap

NOW = datetime.datetime(2025, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


# ---------------------------------------------------------------- scopes

@pytest.mark.parametrize("namespaces, scope", [
    ([], "*"),
    (["a"], "a"),
    (["b", "a", "a"], "a,b"),
    (["team-*"], "team-*"),
    (["*"], "*"),
    (["a", "*"], "*"),
    (["a, !a-test", "b"], "a,b"),  # exclusions only narrow: ignored
    (["!kube-system"], "*"),  # a leading exclusion means every other namespace
    ([" a , b "], "a,b"),
])
def test_scope_of_the_command_line(namespaces, scope):
    assert scope_of(namespaces) == scope


@pytest.mark.parametrize("text, globs", [
    (None, {"*"}),
    ("", {"*"}),  # a Lease that says nothing may guard anything
    ("*", {"*"}),
    ("a,b", {"a", "b"}),
    (" a, ,b ", {"a", "b"}),
    ("a,*", {"*"}),
])
def test_parse_scope(text, globs):
    assert parse_scope(text) == globs


@pytest.mark.parametrize("first, second, overlap", [
    ("a", "a", True),
    ("a", "b", False),
    ("*", "anything", True),
    ("team-*", "team-a", True),
    ("team-a", "team-*", True),
    ("team-*", "other", False),
    ("team-?", "team-ab", False),
    ("team-*", "team-a-*", True),  # the first matches the second as a name
    ("team-a-*", "team-b-*", False),  # the literal starts disagree: no name matches both
    ("*-prod", "*-dev", False),  # the literal ends disagree
    ("team-*", "*-prod", True),  # team-prod matches both
    ("a[bc]d", "a?d", True),
    ("x[bc]d", "y*", False),
])
def test_globs_overlap(first, second, overlap):
    assert globs_overlap(first, second) is overlap
    assert globs_overlap(second, first) is overlap


@pytest.mark.parametrize("first, second, overlap", [
    ("*", "*", True),
    ("*", "a", True),
    ("a,b", "*", True),
    ("a,b", "b,c", True),
    ("a,b", "c,d", False),
    ("team-*", "team-x", True),
    ("team-a-*", "team-b-*,c", False),
])
def test_scopes_overlap(first, second, overlap):
    assert scopes_overlap(first, second) is overlap
    assert scopes_overlap(second, first) is overlap


def test_describe_scope():
    assert describe_scope("*") == "all namespaces"
    assert describe_scope("a") == "namespace a"
    assert describe_scope("b,a") == "namespaces a, b"


# ---------------------------------------------------------------- the conflicting Lease

def view(name: str, scope: str, holder: str | None = "other-1", age: float = 1, duration: int = 15,
         namespace: str = "ops") -> LeaseView:
    return LeaseView(namespace=namespace, name=name, holder=holder,
                     renewed=NOW - datetime.timedelta(seconds=age), duration=duration, scope=scope)


def conflict(leases: list[LeaseView], scope: str = "*") -> LeaseView | None:
    return conflicting_lease(leases, namespace="mine", name="mydb-operator", identity="me-1", scope=scope, now=NOW)


def test_a_live_lease_of_someone_else_with_an_overlapping_scope_conflicts():
    other = view("team-a-operator", "team-a")
    assert conflict([other], scope="*") == other
    assert conflict([other], scope="team-a,team-b") == other


def test_what_does_not_conflict():
    assert conflict([]) is None
    assert conflict([view("mydb-operator", "*", namespace="mine")]) is None, "our own Lease: we stand by for it"
    assert conflict([view("old", "*", holder="me-1")]) is None, "held by us"
    assert conflict([view("released", "*", holder=None)]) is None
    assert conflict([view("stale", "*", age=16, duration=15)]) is None, "not renewed within its duration"
    assert conflict([view("team-b", "team-b")], scope="team-a") is None, "disjoint scopes"


def test_a_lease_renewed_exactly_one_duration_ago_still_counts():
    assert conflict([view("edge", "*", age=15, duration=15)]) is not None


def test_the_first_conflict_by_namespace_and_name_is_named():
    leases = [view("z", "*", namespace="b"), view("y", "*", namespace="a"), view("x", "*", namespace="b")]
    found = conflict(leases)
    assert found is not None and (found.namespace, found.name) == ("a", "y")


def test_the_message_names_the_lease_its_holder_its_scope_and_what_to_do():
    other = view("team-a-operator", "team-a", holder="operator-7d9f-abc", age=3)
    text = conflict_message(other, namespace="mine", name="mydb-operator", scope="*", now=NOW)
    assert "ops/team-a-operator" in text and "operator-7d9f-abc" in text
    assert "manages namespace team-a" in text and "this instance's all namespaces" in text
    assert "renewed 3s ago" in text
    assert "stop that instance" in text and "-n" in text
    assert "--leader-lease-namespace ops --leader-lease-name team-a-operator" in text
    assert "\n" not in text


@pytest.mark.parametrize("pod, service_account, kubeconfig, chosen", [
    ("pod-ns", "sa-ns", "kc-ns", "pod-ns"),
    (None, "sa-ns", "kc-ns", "sa-ns"),
    ("", None, "kc-ns", "kc-ns"),
    (None, None, None, "default"),
])
def test_lease_namespace_outside_and_inside_a_pod(pod, service_account, kubeconfig, chosen):
    assert choose_lease_namespace(pod, service_account, kubeconfig) == chosen


def test_default_namespace_reads_the_kubeconfig_context(monkeypatch, tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: a, context: {cluster: c, user: u, namespace: team-a}}]
current-context: a
""")
    from kubernetes.config import kube_config
    monkeypatch.setattr(identity, "SERVICE_ACCOUNT_NAMESPACE", str(tmp_path / "absent"))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    assert identity.default_namespace(None) == "team-a"
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))
    assert identity.default_namespace(None) == "default"
    assert identity.default_namespace("from-pod") == "from-pod"  # POD_NAMESPACE, through the settings


def test_the_lease_namespace_and_identity_come_from_the_flag_else_the_pods_environment():
    def config(*argv: str, **environ: str) -> Config:
        return load(cli.build_parser().parse_args(["run", *argv]), environ)
    assert config().leader_lease_namespace is None  # decided at election: service account, kubeconfig, default
    assert config(POD_NAMESPACE="ops").leader_lease_namespace == "ops"
    assert config("--leader-lease-namespace", "mine", POD_NAMESPACE="ops").leader_lease_namespace == "mine"
    assert config(POD_NAME="mydb-operator-7d9f-x2").identity == "mydb-operator-7d9f-x2"
    assert config().identity == f"{socket.gethostname()}-{os.getpid()}"


# ---------------------------------------------------------------- the command line

@pytest.mark.parametrize("argv, elect", [
    ([], True),  # the default
    (["--leader-elect"], True),  # what older charts and tests pass
    (["--leader-elect=true"], True),
    (["--leader-elect=false"], False),
    (["--leader-elect", "False"], False),
])
def test_leader_election_is_on_unless_turned_off(argv, elect):
    args = cli.build_parser().parse_args(["run", *argv])
    assert load(args, {}).leader_elect is elect


def test_a_leader_elect_value_that_is_no_boolean_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["run", "--leader-elect=maybe"])
    assert exit_.value.code == 2
    assert "'maybe': expected true or false: one of true, yes, on, 1 or false, no, off, 0" in capsys.readouterr().err


# ---------------------------------------------------------------- the Lease, against a fake API

class FakeLeases:
    """The Lease's requests by URL path (a cluster/clients.Connection's get and send), on a dict of the API's
    JSON, with resourceVersion compare-and-swap."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.versions = 0
        self.list_status: int | None = None  # an ApiException status for the cluster-wide list
        self.requests: list[tuple[str, str]] = []  # (verb, path)

    def dedicated(self) -> FakeLeases:
        return self

    def put(self, lease: dict[str, Any]) -> None:
        self.versions += 1
        lease["metadata"]["resourceVersion"] = str(self.versions)
        self.stored[(lease["metadata"]["namespace"], lease["metadata"]["name"])] = copy.deepcopy(lease)

    @staticmethod
    def parsed(path: str) -> tuple[str | None, str | None]:
        match = re.fullmatch(r"/apis/coordination.k8s.io/v1(?:/namespaces/([^/]+))?/leases(?:/([^/]+))?", path)
        assert match, path
        return match.group(1), match.group(2)

    def get(self, path: str, *, timeout: Any = None, **query: Any) -> dict[str, Any]:
        self.requests.append(("GET", path))
        namespace, name = self.parsed(path)
        if name is None:
            assert namespace is None  # listed cluster-wide
            if self.list_status:
                raise ApiException(status=self.list_status, reason="Forbidden")
            key, value = query["labelSelector"].split("=")
            return {"items": [copy.deepcopy(lease) for lease in self.stored.values()
                              if (lease["metadata"].get("labels") or {}).get(key) == value]}
        if (namespace, name) not in self.stored:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.stored[(namespace, name)])

    def send(self, method: str, path: str, body: Any = None, *, timeout: Any = None, **_: Any) -> None:
        self.requests.append((method, path))
        namespace, name = self.parsed(path)
        assert namespace is not None
        if method == "POST":
            if (namespace, body["metadata"]["name"]) in self.stored:
                raise ApiException(status=409, reason="Conflict")
            body["metadata"]["namespace"] = namespace
        else:
            assert method == "PUT" and name is not None
            if (namespace, name) not in self.stored:
                raise ApiException(status=404, reason="Not Found")
            if body["metadata"].get("resourceVersion") != self.stored[(namespace, name)]["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
        self.put(body)

    def exchange(self, method: str, path: str, body: Any, *, timeout: Any = None, **_: Any) -> dict[str, Any]:
        self.send(method, path, body)
        namespace, name = self.parsed(path)
        return copy.deepcopy(self.stored[(namespace, name or body["metadata"]["name"])])


def held_lease(namespace: str, name: str, holder: str, scope: str, age: float = 1) -> dict[str, Any]:
    renewed = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=age)
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {names.OPERATOR_LEASE_LABEL: "true"},
                     "annotations": {names.OPERATOR_SCOPE_ANNOTATION: scope}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }


def holder(leases: FakeLeases, namespace: str = "ops", name: str = "mydb-operator") -> str | None:
    return leases.stored[(namespace, name)]["spec"].get("holderIdentity")


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


def instance(leases: FakeLeases, identity: str, scope: str = "*", name: str = "mydb-operator",
             namespace: str = "ops") -> LeaderLease:
    return LeaderLease(namespace, name, identity, leases, duration=15, scope=scope)  # type: ignore[arg-type]


def test_the_lease_is_labelled_and_carries_the_scope(leases):
    first = instance(leases, "a-1", scope="team-a,team-b")
    assert first.try_acquire()
    stored = leases.stored[("ops", "mydb-operator")]
    assert stored["metadata"]["labels"] == {names.OPERATOR_LEASE_LABEL: "true"}
    assert stored["metadata"]["annotations"] == {names.OPERATOR_SCOPE_ANNOTATION: "team-a,team-b"}
    assert stored["spec"]["holderIdentity"] == "a-1"
    assert leases.requests == [("GET", "/apis/coordination.k8s.io/v1/namespaces/ops/leases/mydb-operator"),
                               ("POST", "/apis/coordination.k8s.io/v1/namespaces/ops/leases")]


def test_a_renewal_is_one_replace_and_the_release_a_read_and_a_replace_with_micro_times(leases):
    me = instance(leases, "a-1")
    assert me.try_acquire()
    acquired = leases.stored[("ops", "mydb-operator")]["spec"]["acquireTime"]
    leases.requests.clear()
    assert me.try_acquire() and me.try_acquire()
    path = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/mydb-operator"
    assert leases.requests == [("PUT", path), ("PUT", path)]  # each by the resourceVersion the last one stored
    spec = leases.stored[("ops", "mydb-operator")]["spec"]
    assert spec["acquireTime"] == acquired  # kept while ours
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", spec["renewTime"])  # MicroTime
    leases.requests.clear()
    me.release()
    assert leases.requests == [("GET", path), ("PUT", path)]
    assert "holderIdentity" not in leases.stored[("ops", "mydb-operator")]["spec"]


def test_a_renewal_after_someone_else_wrote_the_lease_reads_it_and_stands_by(leases):
    me, other = instance(leases, "a-1"), instance(leases, "b-1")
    assert me.try_acquire()
    taken = copy.deepcopy(leases.stored[("ops", "mydb-operator")])
    taken["spec"]["holderIdentity"] = "b-1"  # as after an expiry seen by the other instance
    leases.put(taken)
    leases.requests.clear()
    assert not me.try_acquire()
    path = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/mydb-operator"
    assert leases.requests == [("PUT", path), ("GET", path)]  # the replace refused (409), then read
    assert holder(leases) == "b-1" and me.holder == "b-1"
    assert not me.try_acquire()  # standing by: read first
    assert leases.requests[-1] == ("GET", path)
    assert other.try_acquire()  # b-1's own instance renews it


def test_a_renewal_of_a_deleted_lease_creates_it_again(leases):
    me = instance(leases, "a-1")
    assert me.try_acquire()
    del leases.stored[("ops", "mydb-operator")]
    leases.requests.clear()
    assert me.try_acquire()
    assert [verb for verb, _ in leases.requests] == ["PUT", "GET", "POST"]
    assert holder(leases) == "a-1"


def test_an_unlabelled_lease_of_an_older_operator_gets_marked_on_takeover(leases):
    old = held_lease("ops", "mydb-operator", "old-1", "*", age=60)
    old["metadata"]["labels"], old["metadata"]["annotations"] = None, None
    leases.put(old)
    assert instance(leases, "new-1", scope="a").try_acquire()
    stored = leases.stored[("ops", "mydb-operator")]
    assert stored["metadata"]["labels"][names.OPERATOR_LEASE_LABEL] == "true"
    assert stored["metadata"]["annotations"][names.OPERATOR_SCOPE_ANNOTATION] == "a"


def test_a_standby_says_for_whom_it_stands_by(leases):
    first, second = instance(leases, "a-1"), instance(leases, "b-1")
    assert second.standby_status() == "standby: waiting for Lease ops/mydb-operator"
    assert first.try_acquire()
    assert not second.try_acquire()
    assert second.holder == "a-1"
    assert second.standby_status() == "standby: Lease ops/mydb-operator held by a-1"


def test_a_released_lease_is_taken_at_once(leases):
    first, second = instance(leases, "a-1"), instance(leases, "b-1")
    assert first.try_acquire()
    first.release()
    assert holder(leases) is None
    assert second.try_acquire()
    assert holder(leases) == "b-1"


def test_the_renewal_stops_at_the_release_and_never_takes_the_lease_back(leases):
    """Found in CI: a renewal that ran after the release took the Lease again, so the
    instance started next, under another Lease, was refused for an overlapping scope."""
    me = LeaderLease("ops", "mydb-operator", "me-1", leases, duration=1)  # type: ignore[arg-type]
    assert me.try_acquire()
    renewing = me.keep(on_lost=lambda: None)
    me.release()
    renewing.join(timeout=2)  # one renewal period is a third of the duration
    assert not renewing.is_alive()
    assert holder(leases) is None


def test_the_standby_logs_each_new_holder(leases, monkeypatch, caplog):
    holders = iter(["a-1", "a-1", "c-1", None])
    me = instance(leases, "b-1")

    def attempt() -> bool:
        me.holder = next(holders)
        return me.holder is None
    monkeypatch.setattr(me, "_attempt", attempt)
    with caplog.at_level(logging.INFO, logger="mydb_operator.leadership.lease"):
        me.acquire(retry_every=0)
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("waiting to lead (Lease ops/mydb-operator, identity b-1, scope *)")
    assert said[1:] == ["standby: Lease ops/mydb-operator held by a-1", "standby: Lease ops/mydb-operator held by c-1",
                        "became the leader (Lease ops/mydb-operator, identity b-1)"]


def test_an_overlapping_live_lease_under_another_name_refuses(leases):
    leases.put(held_lease("team-a", "team-a-operator", "pod-x", "team-a"))
    with pytest.raises(ScopeConflict) as refused:
        instance(leases, "me-1", scope="*").refuse_overlap()
    assert "team-a/team-a-operator" in str(refused.value) and "pod-x" in str(refused.value)


def test_the_own_lease_a_disjoint_scope_or_a_dead_holder_do_not_refuse(leases):
    leases.put(held_lease("ops", "mydb-operator", "pod-x", "*"))  # ours: stand by for it
    leases.put(held_lease("team-b", "team-b-operator", "pod-y", "team-b"))
    leases.put(held_lease("team-a", "crashed", "pod-z", "*", age=120))
    instance(leases, "me-1", scope="team-a").refuse_overlap()


def test_a_forbidden_list_warns_once_and_goes_on(leases, caplog):
    leases.list_status = 403
    me = instance(leases, "me-1")
    with caplog.at_level(logging.WARNING, logger="mydb_operator.leadership.lease"):
        me.refuse_overlap()
        me.refuse_overlap()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot be checked" in warnings[0]


def test_an_unreachable_api_server_is_a_warning_not_a_crash(leases, monkeypatch):
    """urllib3's errors (connection refused) are not OSErrors: they must not end the renewal thread."""
    import urllib3

    def refused(*_: Any, **__: Any) -> None:
        raise urllib3.exceptions.MaxRetryError(None, "/apis", "connection refused")  # type: ignore[arg-type]
    me = instance(leases, "me-1")
    monkeypatch.setattr(leases, "get", refused)
    assert me._attempt() is False


def test_a_leader_that_cannot_reach_the_api_server_gives_up_before_its_lease_can_expire(leases, monkeypatch):
    """The renewal keeps trying through connection errors, and calls on_lost after two thirds of the Lease's
    duration without a renewal: before a standby could take the Lease (after the whole duration), never after."""
    import threading

    import urllib3

    def refused(*_: Any, **__: Any) -> None:
        raise urllib3.exceptions.MaxRetryError(None, "/apis", "connection refused")  # type: ignore[arg-type]
    me = LeaderLease("ops", "mydb-operator", "me-1", leases, duration=1)  # type: ignore[arg-type]
    assert me.try_acquire()
    monkeypatch.setattr(leases, "get", refused)
    monkeypatch.setattr(leases, "exchange", refused)
    lost = threading.Event()
    started = time.monotonic()
    renewing = me.keep(on_lost=lost.set)
    assert lost.wait(timeout=5), "the renewal thread died or never gave up"
    gave_up = time.monotonic() - started
    assert 0.6 <= gave_up < 0.95, f"gave up {gave_up:.2f}s after its last renewal, with a 1 s Lease"
    renewing.join(timeout=2)
    assert not renewing.is_alive()


# ---------------------------------------------------------------- start-up: refuse, or stand by then lead

ARGS = Config(leader_lease_namespace="ops", health_port=0, namespaces=("team-a",), identity="me-1")


def test_two_simultaneous_starts_refuse_after_acquiring_and_release(leases, monkeypatch):
    """The first check saw nothing; right after acquiring, the other's Lease is there: release ours, refuse."""
    made: list[LeaderLease] = []

    class Recording(LeaderLease):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

        def acquire(self, retry_every: float = 2.0) -> None:
            super().acquire(retry_every)
            leases.put(held_lease("team-a", "team-a-operator", "pod-x", "team-a"))  # the other one, meanwhile

    monkeypatch.setattr(election, "LeaderLease", Recording)
    monkeypatch.setattr(kubernetes.config, "load_incluster_config", lambda: None)
    with pytest.raises(ScopeConflict):
        leader_election.lead(ARGS, leases)  # type: ignore[arg-type]
    assert made and holder(leases) is None


class ClosingMemo:
    """What run_operator needs of the memo when kopf is faked: that it closes it at the end."""

    def __init__(self) -> None:
        self.closed = 0
        self.api = None  # handed to the (faked) leader election

    def close(self) -> None:
        self.closed += 1


def test_a_scope_conflict_exits_2_with_the_message_and_no_traceback(monkeypatch, caplog):
    def refused(*_: object, **__: object) -> None:
        raise ScopeConflict("mydb-operator: refusing to start: ...")
    memo = ClosingMemo()
    monkeypatch.setattr(run, "tune_malloc", lambda: None)
    monkeypatch.setattr(run, "prepare_operator", lambda config, runner: memo)
    monkeypatch.setattr(run.logs, "configure", lambda log_format: None)
    monkeypatch.setattr(run, "lead", refused)
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as exit_:
        run.run_operator(Config())
    assert exit_.value.code == 2
    assert [r.getMessage() for r in caplog.records] == ["mydb-operator: refusing to start: ..."]
    assert not any(r.exc_info for r in caplog.records)
    assert memo.closed == 1  # Helm's temporary folder goes on this way out too


def test_without_leader_election_a_warning_says_nothing_stops_a_second_instance(monkeypatch, caplog):
    import kopf

    ran: list[dict[str, Any]] = []
    memo = ClosingMemo()
    monkeypatch.setattr(run, "tune_malloc", lambda: None)
    monkeypatch.setattr(run, "prepare_operator", lambda config, runner: memo)
    monkeypatch.setattr(run.logs, "configure", lambda log_format: None)
    monkeypatch.setattr(run, "lead", lambda config, api, before_exit: pytest.fail("elected with --leader-elect=false"))
    monkeypatch.setattr(kopf, "run", lambda **kwargs: ran.append(kwargs))
    with caplog.at_level(logging.WARNING):
        run.run_operator(Config(leader_elect=False))
    assert ran and ran[0]["memo"] is memo and memo.closed == 1  # closed once kopf stopped
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "--leader-elect=false" in warning and "nothing stops a second mydb-operator instance" in warning


# ---------------------------------------------------------------- /healthz while standing by

def test_the_standby_answers_healthz_with_200_and_says_whom_it_waits_for():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with standby_health.standby_health(port, lambda: "standby: Lease ops/mydb-operator held by a-1"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
            assert response.read().decode() == "standby: Lease ops/mydb-operator held by a-1\n"
        with pytest.raises(urllib.request.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
        assert missing.value.code == 404
