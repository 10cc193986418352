"""The benchmark's pure parts: metric parsing and diffs, the operator's share, percentiles, targets.

    .venv/bin/python -m pytest bench
"""

from __future__ import annotations

from bench import apf, prom, report, stats

APISERVER = '''# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 10
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",group="myapp.example.com",resource="mydatabases",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} 7
apiserver_request_total_other{verb="GET"} 99
apiserver_flowcontrol_dispatched_requests_total{flow_schema="mydb-bench-op-list-pods",priority_level="workload-low"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema="mydb-bench-op-patch-mydatabases-status",priority_level="workload-low"} 1
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 50
'''


def test_parse_keeps_only_the_named_metrics_with_their_labels():
    samples = prom.parse(APISERVER, ["apiserver_request_total"])
    assert len(samples) == 4  # the _other metric and the comment are left out
    assert prom.total(samples, "apiserver_request_total", verb="LIST") == 10


def test_diff_counts_new_series_from_zero_and_drops_unchanged():
    before = prom.parse(APISERVER, ["apiserver_request_total"])
    after = prom.parse(APISERVER.replace("} 10", "} 15") + 'apiserver_request_total{verb="GET",resource="services"} 2\n',
                       ["apiserver_request_total"])
    delta = prom.diff(after, before)
    assert sorted(delta.values()) == [2, 5]


def test_requests_grouped_by_verb_and_resource_with_subresources_and_without_non_resource_urls():
    grouped = prom.requests_by_verb_resource(prom.parse(APISERVER, ["apiserver_request_total"]))
    assert grouped == {"LIST": {"pods": 10}, "POST": {"pods": 4}, "PATCH": {"mydatabases/status": 2}}
    assert prom.split_reads_writes(grouped) == (10, 6)


def test_operator_share_comes_from_its_own_flow_schemas_only():
    schemas, meaning = apf.flow_schemas("mydb-system", "mydb-operator")
    names = [s["metadata"]["name"] for s in schemas]
    assert len(names) == len(set(names))
    assert all(s["spec"]["matchingPrecedence"] < 9000 for s in schemas)  # before the built-in service-accounts
    subject = schemas[0]["spec"]["rules"][0]["subjects"][0]
    assert subject == {"kind": "ServiceAccount", "serviceAccount": {"namespace": "mydb-system", "name": "mydb-operator"}}
    samples = prom.parse(APISERVER, ["apiserver_flowcontrol_dispatched_requests_total"])
    share = apf.operator_requests(samples, meaning)
    assert share == {"list": {"pods": 3}, "patch": {"mydatabases/status": 1}}  # exempt (admin, kwok) is not ours
    assert apf.reads_writes(share) == (3, 1)
    # The leader election's Lease traffic is counted apart from the databases'.
    with_lease = {**share, "update": {"leases": 4}, "get": {"leases": 4}}
    assert apf.reads_writes(with_lease) == (3, 1)
    assert apf.lease_writes(with_lease) == 4


def test_percentiles_are_nearest_rank_and_all_needs_every_database():
    assert stats.percentile([5, 1, 3, 2, 4], 50) == 3
    assert stats.percentile(range(1, 101), 95) == 95
    assert stats.percentile([], 50) is None
    assert stats.summary({"a": 1.0, "b": 2.0}, expected=2)["all"] == 2.0
    assert stats.summary({"a": 1.0}, expected=2)["all"] is None


def test_targets_judge_the_sizes_that_ran():
    wave = {"deployed": {"all": 30.0}, "ready": {"all": 40.0}}
    results = {"sizes": [{"n": 100, "ready_vs_floor": 1.2, "floor": {},
                          "scaled_to_zero": {"deployed": {"all": 20.0}},
                          "operator": {"create": wave, "idle": {"helm_runs": 0, "operator_api": {"writes": 1},
                                                                "reconciles": 200}}}]}
    met = {t["target"]: t["met"] for t in report.targets(results)}
    assert met == {"100 releases deployed within 27 s, scaled to zero (Flux's condition)": True,
                   "100 releases deployed within 27 s, while 300 pods start": False,
                   "N=100: all Ready within 1.3x the floor": True,
                   "N=100: zero Helm runs and zero API writes when idle": False}
