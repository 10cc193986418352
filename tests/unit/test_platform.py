"""Platform customization: precedence, patches of both kinds, bad configs refused whole."""

import re

import pytest

from mydb_operator.desired.platform import (PlatformError, apply_values, denied, merge, parse_platform,
                                            patch_objects)
from mydb_operator.desired.values import database_values
from mydb_operator.helm.chart_check import missing_objects
from mydb_operator.model.errors import SpecError
from mydb_operator.model.spec import parse_spec

SPEC = {"replicas": 3, "version": "15.2", "storage": "10Gi"}
PLATFORM = {
    "values": {
        "image": {"registry": "mirror.example.com", "pullPolicy": "IfNotPresent"},
        "imagePullSecrets": [{"name": "regcred"}],
        "storage": {"storageClassName": "fast"},
        "nodeSelector": {"pool": "databases"},
        "resources": {"requests": {"cpu": "500m"}},
        "postgresql": {"parameters": {"max_connections": "300", "work_mem": "8MB"}},
    },
    "valuePatches": [{"op": "replace", "path": "/image/pullPolicy", "value": "Always"}],
    "objectPatches": [{"target": {"kind": "StatefulSet", "name": "*"},
                       "patch": [{"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "db"}]}],
}


def test_precedence_chart_platform_database_patches():
    """Platform defaults show where the database is silent; the database wins; value patches win over both."""
    spec = parse_spec({**SPEC, "resources": {"requests": {"cpu": "2"}}, "scheduling": {"nodeSelector": {"pool": "x"}},
                       "postgresql": {"parameters": {"work_mem": "64MB"}}})
    values = database_values("db", spec, parse_platform(PLATFORM))
    assert values["image"] == {"registry": "mirror.example.com", "pullPolicy": "Always", "tag": "15.2"}
    assert values["imagePullSecrets"] == [{"name": "regcred"}]
    assert values["storage"] == {"storageClassName": "fast", "size": "10Gi"}
    assert values["resources"] == {"requests": {"cpu": "2"}}
    assert values["nodeSelector"] == {"pool": "x"}
    assert values["postgresql"]["parameters"] == {"max_connections": "300", "work_mem": "64MB"}


def test_database_storage_class_beats_platform_default():
    values = database_values("db", parse_spec({**SPEC, "storageClassName": "slow"}), parse_platform(PLATFORM))
    assert values["storage"]["storageClassName"] == "slow"


def test_no_platform_changes_nothing():
    spec = parse_spec(SPEC)
    assert database_values("db", spec, parse_platform(None))["image"] == {"tag": "15.2"}


def test_merge_replaces_lists_and_scalars_and_merges_maps():
    assert merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": 2}) == {"a": {"b": 1, "c": [2]}, "d": 2}


def test_object_patches_by_kind_and_name_glob():
    platform = parse_platform({"objectPatches": [
        {"target": {"kind": "Service", "name": "*-ro"}, "patch": [{"op": "add", "path": "/metadata/labels",
                                                                   "value": {"tier": "ro"}}]}]})
    docs = [{"kind": "Service", "metadata": {"name": "db-ro"}}, {"kind": "Service", "metadata": {"name": "db"}},
            {"kind": "StatefulSet", "metadata": {"name": "db-ro"}}]
    patched = patch_objects(platform.object_patches, docs)
    assert [d["metadata"].get("labels") for d in patched] == [{"tier": "ro"}, None, None]


def test_object_patch_that_does_not_apply_fails_the_whole_render():
    platform = parse_platform({"objectPatches": [
        {"target": {"kind": "StatefulSet"}, "patch": [{"op": "replace", "path": "/spec/nothing/here", "value": 1}]}]})
    with pytest.raises(PlatformError, match=r"objectPatches\[0\] does not apply to StatefulSet db"):
        patch_objects(platform.object_patches, [{"kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {}}])


@pytest.mark.parametrize("config, words", [
    ({"valuePatches": [{"op": "frob", "path": "/a"}]}, "valuePatches: Unknown operation 'frob'"),
    ({"valuePatches": [{"op": "add", "path": "a", "value": 1}]}, "valuePatches: Location must start with /"),
    ({"valuePatches": {"op": "add"}}, "valuePatches: must be a list"),
    ({"objectPatches": [{"patch": []}]}, r"objectPatches\[0\].target.kind: required"),
    ({"objectPatches": [{"target": {"kind": "Pod"}, "patch": [{"path": "/a"}]}]}, r"objectPatches\[0\].patch"),
    ({"values": ["not", "a", "map"]}, "values: must be a mapping"),
    ({"valuesPatches": []}, "unknown keys in the platform config: valuesPatches"),
    ({"deniedParameters": "fsync"}, "deniedParameters: must be a list"),
    ({"majors": [15, 12]}, r"majors: must be a non-empty list of supported majors \(13, 14, 15, 16, 17\)"),
    ({"majors": []}, "majors: must be a non-empty list"),
    ({"majors": "15"}, "majors: must be a non-empty list"),
])
def test_bad_platform_configs_are_refused_whole(config, words):
    with pytest.raises(PlatformError, match=words):
        parse_platform(config)


def test_value_patch_that_does_not_apply_is_reported():
    platform = parse_platform({"valuePatches": [{"op": "replace", "path": "/nodeSelector/pool", "value": "x"}]})
    with pytest.raises(PlatformError, match="valuePatches do not apply"):
        apply_values(platform, {"replicas": 1})


def test_denied_parameters_builtin_and_platform():
    platform = parse_platform({"deniedParameters": ["shared_preload_libraries"]})
    assert denied(platform, {"fsync": "off", "work_mem": "1MB", "shared_preload_libraries": "x"}) == [
        "fsync", "shared_preload_libraries"]
    with pytest.raises(SpecError, match=r"spec.postgresql.parameters: listen_addresses cannot be set"):
        database_values("db", parse_spec({**SPEC, "postgresql": {"parameters": {"listen_addresses": "*"}}}), platform)


def test_chart_check_names_what_a_custom_chart_lacks():
    objects = [{"kind": "StatefulSet", "metadata": {"name": "r"}, "spec": {
        "selector": {"matchLabels": {"app": "r"}}, "template": {"spec": {"containers": [{"name": "db"}]}}}},
        {"kind": "Service", "metadata": {"name": "r"}}]
    problems = missing_objects(objects, "r")
    assert any("must select on exactly" in p for p in problems)
    assert any("no container named postgres" in p for p in problems)
    assert any("volumeClaimTemplate named data" in p for p in problems)
    assert "no Service named r-ro" in problems and "no CronJob named r-backup when backup is enabled" in problems


def test_a_major_the_platform_has_no_image_for_is_refused_before_anything_is_made():
    platform = parse_platform({"majors": [17, 15]})
    assert platform.majors == (15, 17)
    assert database_values("db", parse_spec(SPEC), platform)["image"]["tag"] == "15.2"
    with pytest.raises(SpecError, match=r"spec.version: PostgreSQL 16 is not offered by this platform, which has "
                                        r"images for 15, 17"):
        database_values("db", parse_spec({**SPEC, "version": "16.4"}), platform)
    assert parse_platform({}).majors == (13, 14, 15, 16, 17)


PIN_15, PIN_17 = "sha256:" + "1" * 64, "sha256:" + "7" * 64


def test_a_pinning_platform_runs_each_pinned_version_from_its_digest_and_refuses_the_others():
    platform = parse_platform({"majors": [15, 17], "imageDigests": {"15.2": PIN_15, "17.6": PIN_17}})
    image = database_values("db", parse_spec(SPEC), platform)["image"]
    assert (image["tag"], image["digest"]) == ("15.2", PIN_15)
    assert database_values("db", parse_spec({**SPEC, "version": "17.6"}), platform)["image"]["digest"] == PIN_17
    with pytest.raises(SpecError, match=r"spec.version: PostgreSQL 15.3 has no pinned image on this platform, "
                                        r"which pins 15.2, 17.6"):
        database_values("db", parse_spec({**SPEC, "version": "15.3"}), platform)
    assert "digest" not in database_values("db", parse_spec(SPEC), parse_platform({}))["image"]


@pytest.mark.parametrize("pins, says", [
    (["15.2"], "must map versions to digests"),
    ({15.2: PIN_15}, "is not a MAJOR.MINOR version"),
    ({"16.1": PIN_15}, "16.1 is of a major the platform does not offer"),
    ({"15.2": "sha256:abc"}, "imageDigests.15.2: must be sha256:<64 lowercase hex>"),
    ({"15.2": PIN_15}, "majors offers 17 but no version of it is pinned"),
])
def test_bad_pins_stop_the_operator_with_the_entry_named(pins, says):
    with pytest.raises(PlatformError, match=re.escape(says)):
        parse_platform({"majors": [15, 17], "imageDigests": pins})


def test_the_local_platform_offers_the_majors_its_registry_builds():
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    local = parse_platform(yaml.safe_load((repo / "examples" / "platform-local-node.yaml").read_text()))
    built = (repo / "hack" / "images.sh").read_text()
    assert local.majors == (15, 17)
    assert "[postgres-17]=" in built and "PG_MAJOR=15" in built


def test_the_operator_in_a_pod_is_admitted_by_the_databases_network_policy_where_it_runs():
    """In a pod, the operator adds its namespace and pod labels as the policy's operator peer; outside the cluster
    (no namespace) it adds nothing; a platform that names the peer itself keeps its own."""
    from mydb_operator.desired.platform import admitting_operator

    admitted = admitting_operator(parse_platform({"values": {"networkPolicy": {"enabled": True}}}), "ops")
    assert admitted.values["networkPolicy"] == {"enabled": True, "operator": [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mydatabase-operator"}}}]}
    outside = parse_platform(None)
    assert admitting_operator(outside, None) is outside
    own = parse_platform({"values": {"networkPolicy": {"operator": []}}})
    assert admitting_operator(own, "ops") is own
