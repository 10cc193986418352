"""Data volumes: the kubelet's figures, a full volume, storageAutoGrow's decisions, and the pass that uses them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from mydb_operator.model.observation import Observation
from mydb_operator.model.pods import stopped_for_space
from mydb_operator.model.spec import AutoGrow, parse_spec
from mydb_operator.model.volumes import VolumeUsage, data_volumes, kubelet_endpoint
from mydb_operator.policy.volumes import (
    LastGrowth,
    auto_growth,
    current_size,
    full_in_status,
    full_volumes,
    grown_size,
    is_full,
    out_of_space,
)
from mydb_operator.reconcile.volumes import NodeSummaries, keep_volumes
from mydb_operator.status.phases import DEGRADED, assess

from fake_api import FakeApi

MI, GI = 2**20, 2**30
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def usage(pod: str = "db-0", used: int = 500 * MI, capacity: int = 960 * MI) -> VolumeUsage:
    return VolumeUsage(pod, f"data-{pod}", used, capacity, capacity - used)


def summary(namespace: str, *volumes: tuple[str, str, int, int], at: str = "2026-12-04T12:00:05Z") -> dict:
    """A kubelet summary: (pod, claim, used, capacity) per volume measured AT (5 s after NOW by default), each
    pod with a projected token too."""
    return {"node": {"nodeName": "n"}, "pods": [
        {"podRef": {"name": pod, "namespace": namespace, "uid": pod},
         "volume": [{"name": "data", "pvcRef": {"name": claim, "namespace": namespace}, "usedBytes": used,
                     "capacityBytes": capacity, "availableBytes": capacity - used, "time": at},
                    {"name": "kube-api-access", "usedBytes": 1, "capacityBytes": 9, "availableBytes": 8}]}
        for pod, claim, used, capacity in volumes]}


# ------------------------------------------------------------ the kubelet's figures


def test_only_the_databases_own_data_claims_are_read_from_a_summary():
    found = data_volumes(summary("ns", ("db-0", "data-db-0", 10, 100), ("db-x-0", "data-db-x-0", 20, 100),
                                 ("other", "scratch", 30, 100)), "ns", "db")
    assert found == [VolumeUsage("db-0", "data-db-0", 10, 100, 90, NOW + timedelta(seconds=5))]
    assert data_volumes(summary("elsewhere", ("db-0", "data-db-0", 10, 100)), "ns", "db") == []
    # another pod of the node mounting the claim too (RWO is per node) is not the database's pod
    assert data_volumes(summary("ns", ("helper", "data-db-0", 10, 100)), "ns", "db") == []
    assert data_volumes({"pods": [{"podRef": {"name": "db-0", "namespace": "ns"}, "volume": [
        {"pvcRef": {"name": "data-db-0"}, "usedBytes": 1}]}]}, "ns", "db") == []  # not measured yet


def test_a_nodes_kubelet_is_at_its_internal_address_and_reported_port():
    node = {"status": {"addresses": [{"type": "Hostname", "address": "n"}, {"type": "InternalIP",
                                                                             "address": "198.18.128.1"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 16511}}}}
    assert kubelet_endpoint(node) == ("198.18.128.1", 16511)
    assert kubelet_endpoint({"status": {"addresses": []}}) is None


def test_used_percent_rounds_down():
    assert usage(used=799, capacity=1000).used_percent == 79
    assert VolumeUsage("p", "c", 0, 0, 0).used_percent == 0


# ------------------------------------------------------------ a full volume


@pytest.mark.parametrize("left, capacity, full", [
    (31 * MI, 960 * MI, True), (33 * MI, 960 * MI, False),  # small volumes: 32Mi left is the floor
    (1 * GI, 100 * GI, True), (3 * GI, 100 * GI, False),  # large ones: 2 % of them
])
def test_a_volume_is_full_when_less_than_32mi_or_2_percent_is_left(left, capacity, full):
    assert is_full(VolumeUsage("p", "c", capacity - left, capacity, left)) is full


def test_status_names_each_full_volume_and_what_is_left():
    told = full_volumes([usage("db-0", 950 * MI), usage("db-1", 100 * MI)])
    assert told is not None and "db-0: 98% used, 10Mi left of 960Mi" in told and "db-1" not in told
    assert full_volumes([usage("db-0", 100 * MI)]) is None


def test_a_full_volume_degrades_the_database_before_anything_else_is_said():
    said = assess(problem=None, hibernating=False, installed=True, pods=2, ready_pods=2, desired=2,
                  rolled_out=True, failures=[], primary=("WaitingFailoverDelay", "down"), disk_full="full!")
    assert (said.phase, said.ready, said.reason, said.message) == (DEGRADED, False, "DiskFull", "full!")


# ------------------------------------------------------------ storageAutoGrow


@pytest.mark.parametrize("current, increment, limit, grown", [
    ("1Gi", "50%", "10Gi", "1536Mi"),
    ("1536Mi", "50%", "10Gi", "2304Mi"),
    ("2304Mi", "50%", "3Gi", "3Gi"),  # never past the limit
    ("1Gi", "10Gi", "100Gi", "11Gi"),
    ("100Gi", "10%", "1Ti", "110Gi"),
    ("1000M", "1%", "10Gi", "964Mi"),  # rounded up to a whole Mi
])
def test_how_far_a_growth_goes(current, increment, limit, grown):
    assert grown_size(current, increment, limit) == grown


POLICY = AutoGrow(limit="3Gi", threshold_percent=80, increment="50%", interval_seconds=300)


def test_below_the_threshold_nothing_grows():
    assert auto_growth(POLICY, "1Gi", [usage(used=700 * MI)], None, NOW).size is None
    assert auto_growth(POLICY, "1Gi", [], None, NOW).size is None  # no figures: no decision


def test_the_fullest_volume_past_the_threshold_grows_them_all():
    growth = auto_growth(POLICY, "1Gi", [usage("db-0", 500 * MI), usage("db-1", 800 * MI)], None, NOW)
    assert (growth.size, growth.reason) == ("1536Mi", "Grow")
    assert "db-1's data volume is 83% full" in growth.message and "from 1Gi to 1536Mi" in growth.message


def test_at_the_limit_it_says_so_and_grows_no_more():
    growth = auto_growth(POLICY, "3Gi", [usage(used=2700 * MI, capacity=3000 * MI)], None, NOW)
    assert (growth.size, growth.reason) == (None, "LimitReached") and "(3Gi)" in growth.message


def test_at_most_once_per_interval():
    grown = LastGrowth(NOW - timedelta(seconds=100), "512Mi")
    assert auto_growth(POLICY, "1Gi", [usage(used=900 * MI)], grown, NOW).reason == "Interval"
    assert auto_growth(POLICY, "1Gi", [usage(used=900 * MI)], grown, NOW + timedelta(seconds=200)).size == "1536Mi"


def test_a_figure_from_before_the_last_growth_decides_nothing():
    """The kubelet measured the filesystem before it grew from 1Gi: its 90 % is stale."""
    grown = LastGrowth(NOW - timedelta(hours=1), "1Gi")
    stale = auto_growth(POLICY, "1536Mi", [usage(used=900 * MI, capacity=960 * MI)], grown, NOW)
    assert (stale.size, stale.reason) == (None, "Growing")


def test_the_claims_size_is_spec_storage_or_what_auto_grow_grew_them_to():
    assert current_size("1Gi", "1536Mi", POLICY) == "1536Mi"
    assert current_size("2Gi", "1536Mi", POLICY) == "2Gi"  # the user asked for more since
    assert current_size("1Gi", "1536Mi", None) == "1Gi"  # no auto-grow: the storage plan refuses a shrink
    assert current_size("1Gi", None, POLICY) == "1Gi"


@pytest.mark.parametrize("grow, message", [
    ({"limit": "500Mi"}, "below storage"),
    ({"limit": "3Gi", "increment": "0%"}, "neither a share"),
    ({"limit": "3Gi", "increment": "lots"}, "neither a share"),
    ({"limit": "3Gi", "thresholdPercent": 99}, "50 to 95"),
    ({"limit": "3Gi", "intervalSeconds": -1}, "0 to 86400"),
    ({}, "storageAutoGrow.limit: is required"),
])
def test_a_bad_auto_grow_is_refused_naming_the_field(grow, message):
    with pytest.raises(ValueError, match=message):
        parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "storageAutoGrow": grow})


# ------------------------------------------------------------ the pass


def pods_on(node: str, *names: str) -> list[dict]:
    return [{"metadata": {"name": n}, "spec": {"nodeName": node}} for n in names]


def test_one_summary_per_node_serves_every_database_on_it_for_a_while():
    api, clock = FakeApi(), [0.0]
    api.summaries["n1"] = summary("ns", ("a-0", "data-a-0", 1, 10), ("b-0", "data-b-0", 2, 10))
    summaries = NodeSummaries(clock=lambda: clock[0])

    async def both() -> None:
        for _ in range(3):
            await summaries.summary(api, "n1")
    asyncio.run(both())
    assert [r for r in api.reads if r[0] == "stats_summary"] == [("stats_summary", "n1")]
    clock[0] = 16.0
    asyncio.run(summaries.summary(api, "n1"))
    assert len([r for r in api.reads if r[0] == "stats_summary"]) == 2


class Kubelet:
    """A node's kubelet as the summaries see it: each ask counted, answering ANSWER or raising ERROR."""

    def __init__(self, answer: dict | None) -> None:
        self.asked, self.answer, self.error = 0, answer, None

    async def stats_summary(self, node: str) -> dict | None:
        self.asked += 1
        if self.error:
            raise self.error
        return self.answer


def test_a_kubelet_that_does_not_answer_is_asked_again_after_a_back_off_and_its_last_figures_stand():
    """Under CI's load a kubelet's summary once took over 10 s: a 5-minute wait then blanked status.storage."""
    figures, clock = summary("ns", ("a-0", "data-a-0", 1, 10)), [0.0]
    kubelet, summaries = Kubelet(figures), NodeSummaries(clock=lambda: clock[0])
    assert asyncio.run(summaries.summary(kubelet, "n1")) == figures
    kubelet.error = TimeoutError("read timed out")
    seen = []
    for clock[0] in (16.0, 20.0, 31.0, 47.0, 62.0, 93.0, 154.0):
        seen.append((asyncio.run(summaries.summary(kubelet, "n1")) == figures, kubelet.asked))
    # Asked at 16, then 15, 30, 60 s after each failure (31, 61+, 121+); the figures stand for 120 s.
    assert seen == [(True, 2), (True, 2), (True, 3), (True, 3), (True, 4), (True, 4), (False, 5)]
    kubelet.error = None
    clock[0] = 400.0
    assert asyncio.run(summaries.summary(kubelet, "n1")) == figures and kubelet.asked == 6
    kubelet.error = TimeoutError("read timed out")
    for clock[0] in (416.0, 432.0):  # the success reset the back-off: 15 s again
        asyncio.run(summaries.summary(kubelet, "n1"))
    assert kubelet.asked == 8


def test_a_node_that_names_no_kubelet_is_asked_again_only_after_minutes():
    clock = [0.0]
    kubelet, summaries = Kubelet(None), NodeSummaries(clock=lambda: clock[0])  # kwok's: no kubelet endpoint
    assert asyncio.run(summaries.summary(kubelet, "kwok-node-0")) is None
    clock[0] = 299.0
    asyncio.run(summaries.summary(kubelet, "kwok-node-0"))
    assert kubelet.asked == 1
    clock[0] = 301.0
    asyncio.run(summaries.summary(kubelet, "kwok-node-0"))
    assert kubelet.asked == 2


def statefulset(size: str) -> dict:
    return {"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"resources": {"requests": {"storage": size}}}}]}}


def keep(spec: dict, used: int, previous: dict | None = None, size: str = "1Gi", at: str = "2026-12-04T12:00:05Z"):
    api = FakeApi()
    api.summaries["n1"] = summary("ns", ("db-0", "data-db-0", used, 960 * MI), at=at)
    observed = Observation(statefulset=statefulset(size), pods=pods_on("n1", "db-0"), claims=[claim("db-0", size)])
    return asyncio.run(keep_volumes("ns", "db", parse_spec(spec), previous or {}, observed, api, NodeSummaries(), NOW))


def claim(pod: str, capacity: str) -> dict:
    return {"metadata": {"name": f"data-{pod}"}, "status": {"capacity": {"storage": capacity}}}


SPEC = {"replicas": 1, "version": "15.2", "storage": "1Gi",
        "storageAutoGrow": {"limit": "2Gi", "increment": "50%", "intervalSeconds": 60}}


def test_a_growth_raises_the_spec_the_pass_applies_and_says_so_once():
    state = keep(SPEC, 800 * MI)
    assert state.spec is not None and state.spec.storage == "1536Mi"
    assert state.status["size"] == "1536Mi" and state.status["lastAutoGrowth"]["from"] == "1Gi"
    assert state.status["volumes"] == [{"pod": "db-0", "usedBytes": 800 * MI, "capacityBytes": 960 * MI,
                                        "usedPercent": 83}]
    assert [e[:2] for e in state.events] == [("Normal", "StorageAutoGrow")]


def test_the_limit_is_warned_about_once():
    at_limit = keep(SPEC, 800 * MI, size="2Gi")
    assert [e[:2] for e in at_limit.events] == [("Warning", "StorageAutoGrowLimitReached")]
    again = keep(SPEC, 800 * MI, previous={"storage": at_limit.status}, size="2Gi")
    assert again.events == [] and again.status["limitReached"]


def test_without_auto_grow_the_usage_is_shown_and_nothing_grows():
    state = keep({**SPEC, "storageAutoGrow": None}, 950 * MI)
    assert state.spec is not None and state.spec.storage == "1Gi" and state.events == []
    assert state.full is not None and state.full_pods == {"db-0"}


def test_close_to_the_threshold_or_full_the_database_is_looked_at_again_soon():
    """Writes wake no pass: near the threshold (10 points) or full, the next pass comes when new figures may."""
    assert keep(SPEC, 700 * MI).recheck == 15.0  # 72 %: within 10 points of 80
    assert keep(SPEC, 500 * MI).recheck is None  # 52 %
    assert keep({**SPEC, "storageAutoGrow": None}, 950 * MI).recheck == 15.0  # full: its recovery is told soon
    assert keep({**SPEC, "storageAutoGrow": None}, 700 * MI).recheck is None


def crashed(name: str, message: str = "PANIC:  could not write to file \"pg_wal/xlogtemp.41\": No space left on device"):
    return {"metadata": {"name": name}, "status": {"containerStatuses": [{
        "name": "postgres", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "message": message}}}]}}


def test_a_server_that_stopped_for_want_of_space_is_full_until_its_claim_grows():
    """The kubelet has no figures for a pod that does not run: its last words say it."""
    assert stopped_for_space(crashed("db-0"))
    assert not stopped_for_space(crashed("db-0", "FATAL: something else"))
    running = crashed("db-0")
    running["status"]["containerStatuses"][0]["state"] = {"running": {}}
    assert not stopped_for_space(running)  # back: what it said before is history
    assert out_of_space(["db-0"], {"db-0": "1Gi"}, {}) == {"db-0": "1Gi"}
    assert out_of_space(["db-0"], {"db-0": "1Gi"}, {"db-0": "1Gi"}) == {"db-0": "1Gi"}
    assert out_of_space(["db-0"], {"db-0": "2Gi"}, {"db-0": "1Gi"}) == {}  # grown since: it may start now
    told = full_volumes([], ["db-0"], stopped=["db-0"])
    assert told is not None and "db-0: its server stopped: No space left on device" in told
    told = full_volumes([], ["db-0"])  # found full, no figures since, its server not (or no longer) stopped
    assert told is not None and "db-0: full when last measured" in told


def test_a_volume_found_full_stays_full_until_twice_the_margin_is_free():
    """A crashed server frees old WAL as it recovers; a database still writing takes it back at once."""
    recovering = VolumeUsage("p", "c", 960 * MI - 40 * MI, 960 * MI, 40 * MI)
    assert not is_full(recovering) and is_full(recovering, was_full=True)
    assert not is_full(VolumeUsage("p", "c", 960 * MI - 65 * MI, 960 * MI, 65 * MI), was_full=True)
    told = full_volumes([usage("db-0", 920 * MI)], known=["db-0"])
    assert told is not None and "db-0: 95% used" in told


def test_a_pod_found_full_and_not_measured_since_stays_full_until_its_claim_grows():
    """A crash-looping server runs a moment now and then: neither stopped nor measured, it stayed full."""
    state = keep({**SPEC, "storageAutoGrow": None}, 950 * MI)
    api = FakeApi()  # no figures at all this pass
    observed = Observation(pods=pods_on("n1", "db-0"), statefulset=statefulset("1Gi"),
                           claims=[claim("db-0", "1Gi")])
    again = asyncio.run(keep_volumes("ns", "db", parse_spec(SPEC), {"storage": state.status}, observed, api,
                                     NodeSummaries(), NOW))
    assert again.full_pods == {"db-0"} and again.full is not None and "db-0: full when last measured" in again.full
    grown = Observation(pods=observed.pods, statefulset=statefulset("2Gi"), claims=[claim("db-0", "2Gi")])
    after = asyncio.run(keep_volumes("ns", "db", parse_spec(SPEC), {"storage": state.status}, grown, api,
                                     NodeSummaries(), NOW))
    assert after.full_pods == frozenset() and after.full is None


def test_the_full_pods_are_remembered_in_status_with_their_capacity():
    state = keep({**SPEC, "storageAutoGrow": None}, 950 * MI)
    assert state.status["full"] == [{"pod": "db-0", "capacity": "1Gi", "since": "2026-12-04T12:00:00Z"}]
    assert full_in_status(state.status) == {"db-0": "1Gi"}
    again = keep({**SPEC, "storageAutoGrow": None}, 100 * MI, previous={"storage": state.status})
    assert again.was_full == {"db-0"} and again.full_pods == frozenset() and "full" not in again.status


def test_figures_older_than_the_finding_do_not_clear_a_full_volume():
    """CI: a crash-looping primary stopped for want of space while its summary, 25 s old, still said 4 %."""
    found = keep({**SPEC, "storageAutoGrow": None}, 950 * MI)
    stale = keep({**SPEC, "storageAutoGrow": None}, 40 * MI, previous={"storage": found.status},
                 at="2026-12-04T11:59:40Z")
    assert stale.full_pods == {"db-0"} and stale.full is not None and "db-0: full when last measured" in stale.full
    assert stale.status["full"][0]["since"] == "2026-12-04T12:00:00Z"  # kept from the finding


def test_a_server_stopped_for_space_is_told_whatever_its_figures_say():
    api = FakeApi()
    api.summaries["n1"] = summary("ns", ("db-0", "data-db-0", 40 * MI, 960 * MI))
    observed = Observation(pods=[{**crashed("db-0"), "spec": {"nodeName": "n1"}}], statefulset=statefulset("1Gi"),
                           claims=[claim("db-0", "1Gi")])
    state = asyncio.run(keep_volumes("ns", "db", parse_spec(SPEC), {}, observed, api, NodeSummaries(), NOW))
    assert state.full_pods == {"db-0"}
    assert state.full is not None and "db-0: its server stopped: No space left on device" in state.full
