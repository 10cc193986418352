"""The benchmark's pure parts: metric parsing and diffs, the operator's share, percentiles, targets.

.venv/bin/python -m pytest bench
"""

from __future__ import annotations

from typing import Any

from bench import apf, floor, kube, prom, report, stats

APISERVER = """# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 10
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",group="myapp.example.com",resource="mydatabases",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} 7
apiserver_request_total_other{verb="GET"} 99
apiserver_flowcontrol_dispatched_requests_total{flow_schema="mydb-bench-op-list-pods",priority_level="workload-low"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema="mydb-bench-op-patch-mydatabases-status",priority_level="workload-low"} 1
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 50
"""


def test_parse_keeps_only_the_named_metrics_with_their_labels() -> None:
    samples = prom.parse(APISERVER, ["apiserver_request_total"])
    assert len(samples) == 4  # the _other metric and the comment are left out
    assert prom.total(samples, "apiserver_request_total", verb="LIST") == 10


def test_diff_counts_new_series_from_zero_and_drops_unchanged() -> None:
    before = prom.parse(APISERVER, ["apiserver_request_total"])
    after = prom.parse(
        APISERVER.replace("} 10", "} 15") + 'apiserver_request_total{verb="GET",resource="services"} 2\n',
        ["apiserver_request_total"],
    )
    delta = prom.diff(after, before)
    assert sorted(delta.values()) == [2, 5]


def test_requests_grouped_by_verb_and_resource_with_subresources_and_without_non_resource_urls() -> None:
    grouped = prom.requests_by_verb_resource(prom.parse(APISERVER, ["apiserver_request_total"]))
    assert grouped == {"LIST": {"pods": 10}, "POST": {"pods": 4}, "PATCH": {"mydatabases/status": 2}}
    assert prom.split_reads_writes(grouped) == (10, 6)


def test_operator_share_comes_from_its_own_flow_schemas_only() -> None:
    schemas, meaning = apf.flow_schemas("mydb-system", "mydb-operator")
    names = [s["metadata"]["name"] for s in schemas]
    assert len(names) == len(set(names))
    assert all(s["spec"]["matchingPrecedence"] < 9000 for s in schemas)  # before the built-in service-accounts
    subject = schemas[0]["spec"]["rules"][0]["subjects"][0]
    assert subject == {
        "kind": "ServiceAccount",
        "serviceAccount": {"namespace": "mydb-system", "name": "mydb-operator"},
    }
    samples = prom.parse(APISERVER, ["apiserver_flowcontrol_dispatched_requests_total"])
    share = apf.operator_requests(samples, meaning)
    assert share == {"list": {"pods": 3}, "patch": {"mydatabases/status": 1}}  # exempt (admin, kwok) is not ours
    assert apf.reads_writes(share) == (3, 1)
    # The leader election's Lease traffic is counted apart from the databases'.
    with_lease: dict[str, dict[str, float]] = {**share, "update": {"leases": 4}, "get": {"leases": 4}}
    assert apf.reads_writes(with_lease) == (3, 1)
    assert apf.lease_writes(with_lease) == 4


def test_percentiles_are_nearest_rank_and_all_needs_every_database() -> None:
    assert stats.percentile([5, 1, 3, 2, 4], 50) == 3
    assert stats.percentile(range(1, 101), 95) == 95
    assert stats.percentile([], 50) is None
    assert stats.summary({"a": 1.0, "b": 2.0}, expected=2)["all"] == 2.0
    assert stats.summary({"a": 1.0}, expected=2)["all"] is None


def size_100(p50: float, gone: float, writes_per_db: float = 12.0, idle_writes: int = 0) -> dict[str, Any]:
    wave = {
        "deployed": {"all": 30.0},
        "ready": {"all": 40.0},
        "pods_ready": {"all": 45.0, "p50": p50},
        "cpu_seconds": {"operator": 5.0, "helm": 10.0, "kube-apiserver": 35.0},
        "operator_api": {
            "reads": 1500,
            "writes": 1200,
            "writes_per_db": writes_per_db,
            "writes_per_db_by_kind": {"status": 1.0, "others": 11.0},
        },
    }
    return {
        "n": 100,
        "ready_vs_floor": 1.1,
        "floor": {"pods_ready": {"all": 41.0}},
        "operator": {
            "create": wave,
            "idle": {"helm_runs": 0, "operator_api": {"writes": idle_writes}, "cpu_seconds": {}},
            "delete": {
                "gone": {"all": gone},
                "cpu_seconds": {"operator": 3.0, "helm": 0.0},
                "operator_api": {"reads": 10, "writes": 200},
            },
        },
    }


def test_measures_read_the_issues_quantities_from_a_size() -> None:
    m = report.measures(size_100(p50=25.0, gone=10.0))
    assert (m["sts_ready_p50"], m["sts_ready_all"], m["apiserver_cpu"], m["cpu_per_db"]) == (25.0, 45.0, 35.0, 0.15)
    assert (m["delete_all"], m["delete_cpu"], m["delete_requests"]) == (10.0, 3.0, 210)
    assert m["zero_deployed_all"] is None  # the wave did not run


def test_a_target_holds_only_when_it_holds_in_every_run() -> None:
    results = {"runs": [{"sizes": [size_100(p50=25.0, gone=10.0)]}, {"sizes": [size_100(p50=31.0, gone=10.5)]}]}
    met = {t["target"]: t["met"] for t in report.targets(results)}
    assert met["N=100: StatefulSets ready p50 <= 30 s"] is False
    assert met["N=100: all deleted within 12 s"] is True
    assert met["N=100: sts_ready_p50 spread between runs < 15 %"] is False  # 25 and 31: 21 % of the median 28
    assert met["N=100: delete_all spread between runs < 15 %"] is True
    assert met["N=100: idle: 0 Helm runs and 0 API writes"] is True
    assert "N=1000: scaled to zero, all deployed <= 150 s" not in met  # not run: not judged


def test_spread_is_the_range_over_the_median() -> None:
    assert stats.across([10.0, 12.0, 11.0]) == {"median": 11.0, "min": 10.0, "max": 12.0, "spread": 0.182}
    assert stats.median([1.0, 3.0]) == 2.0


def test_the_summary_names_every_measure_with_its_runs() -> None:
    results = {"runs": [{"sizes": [size_100(p50=25.0, gone=10.0)]}, {"sizes": [size_100(p50=31.0, gone=10.5)]}]}
    text = report.summary_table(results)
    assert "StatefulSets ready, p50 (s)" in text and "28.0 [25.0-31.0] 21%" in text
    assert "writes per database: status" in text


def test_writes_by_kind_names_what_each_write_is_for_and_leaves_the_lease_out() -> None:
    by_verb: dict[str, dict[str, float]] = {
        "patch": {"mydatabases/status": 5, "pods": 3, "mydatabases": 1, "statefulsets": 1, "leases": 9},
        "create": {"events": 4, "secrets": 1, "configmaps": 1, "services": 3},
        "get": {"pods": 7},
    }
    assert apf.writes_by_kind(by_verb) == {
        "status": 5,
        "pod labels": 3,
        "events": 4,
        "secrets": 1,
        "mydatabases": 1,
        "configmaps (Helm records, scripts, the primary's record)": 1,
        "others": 4,
    }


def test_a_release_is_gone_when_its_last_record_is() -> None:
    records = {"sh.helm.release.v1.a.v1": "a", "sh.helm.release.v1.a.v2": "a", "sh.helm.release.v1.b.v1": "b"}
    deleted = {"sh.helm.release.v1.a.v1": 3.0, "sh.helm.release.v1.a.v2": 5.0}
    assert kube.releases_gone(records, deleted) == {"a": 5.0}
    assert kube.releases_gone(records, {**deleted, "sh.helm.release.v1.b.v1": 1.0}) == {"a": 5.0, "b": 1.0}


def test_object_paths_follow_the_api_groups_and_plurals() -> None:
    def path(api_version: str, kind: str) -> str:
        return floor.object_path({"apiVersion": api_version, "kind": kind, "metadata": {"name": "db"}}, "ns")

    assert path("v1", "ConfigMap") == "/api/v1/namespaces/ns/configmaps/db"
    assert path("apps/v1", "StatefulSet") == "/apis/apps/v1/namespaces/ns/statefulsets/db"
    assert (
        path("networking.k8s.io/v1", "NetworkPolicy") == "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/db"
    )
    assert path("policy/v1", "PodDisruptionBudget") == "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/db"


def test_each_database_applies_its_secret_first_then_its_manifests() -> None:
    rendered = {"a": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n---\n", "b": ""}
    objects = floor.wave_objects(rendered, "ns")
    assert [(name, obj["kind"]) for name, obj in objects] == [("a", "Secret"), ("a", "ConfigMap"), ("b", "Secret")]


def test_the_scale_targets_judge_a_scaled_to_zero_only_run() -> None:
    def zero_only(n: int, helm_cpu: float, deployed: float) -> dict[str, Any]:
        return {
            "n": n,
            "scaled_to_zero": {
                "deployed": {"all": deployed},
                "memory": {"overall": {"tree_pss_mb": 230.0}},
                "cpu_seconds": {"operator": 0.0, "helm": helm_cpu},
            },
        }

    results = {"runs": [{"sizes": [zero_only(100, 20.0, 24.0), zero_only(1000, 230.0, 140.0)]}]}
    met = {t["target"]: (t["measured"], t["met"]) for t in report.targets(results)}
    assert met["N=1000: scaled to zero, all deployed <= 150 s"][1] is True
    assert met["N=1000: peak PSS < 250 MB"][1] is True
    assert met["N=1000: operator CPU per database (scaled to zero) within 1.2x of N=100's"] == ("1.15x", True)
    assert not any("create wave" in target for target in met)  # no create wave ran: not judged


def test_the_scaled_to_zero_floor_is_what_the_control_plane_alone_takes() -> None:
    size = {
        "n": 1000,
        "scaled_to_zero": {"deployed": {"all": 180.0}},
        "zero_floor": {"applied": {"all": 120.0}, "api": {"cpu_seconds": {"kube-apiserver": 90.0}}},
    }
    m = report.measures(size)
    assert (m["zero_floor_all"], m["zero_vs_floor"], m["zero_floor_apiserver_cpu"]) == (120.0, 1.5, 90.0)
    assert report.measures({"n": 1000, "scaled_to_zero": {"deployed": {"all": 180.0}}})["zero_vs_floor"] is None


def test_the_real_node_summary_judges_the_operators_ready_against_the_floors_pods() -> None:
    turns = {
        "operator": [
            {"pods_ready": 20.0, "ready": 21.0},
            {"pods_ready": 24.0, "ready": 25.5},
            {"pods_ready": 22.0, "ready": 23.0},
        ],
        "floor": [{"pods_ready": 19.0}, {"pods_ready": 21.0}, {"pods_ready": 20.0}],
    }
    summary = report.real_node_summary(turns)
    assert summary["operator: MyDatabase Ready, median (s)"] == 23.0
    assert summary["floor: 3 pods ready, median (s)"] == 20.0
    assert (summary["Ready / floor"], summary["Ready within 1.1x the floor"]) == (1.15, False)
    assert report.real_node_summary({"operator": [], "floor": []})["Ready within 1.1x the floor"] is False
