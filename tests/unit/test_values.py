"""build_values, database_values and release_hash: the seed's values, hibernation, backups, and a hash that moves with them."""

import pytest

from mydb_operator.desired.platform import Platform
from mydb_operator.desired.values import build_values, database_values, release_hash
from mydb_operator.model.errors import SpecError
from mydb_operator.model.spec import parse_spec

SEED = {"replicas": 3, "version": "15.2", "storage": "100Gi",
        "backup": {"schedule": "0 2 * * *", "retention": "7d"}}


def test_seed_values():
    values = build_values("production-db", parse_spec(SEED))
    assert values["replicas"] == 3
    assert values["image"] == {"tag": "15.2"}
    assert values["storage"] == {"size": "100Gi"}  # no class: the platform default or the cluster default
    assert values["credentials"] == {"secretName": "production-db-credentials"}
    assert values["backup"]["enabled"] is True
    assert values["backup"]["schedule"] == "0 2 * * *"
    assert values["roleLabel"] == "myapp.example.com/role"


def test_values_never_hold_a_password():
    text = repr(build_values("db", parse_spec(SEED))).lower()
    assert "password" not in text


def test_no_backup_disables_the_cronjob():
    values = build_values("db", parse_spec({k: v for k, v in SEED.items() if k != "backup"}))
    assert values["backup"] == {"enabled": False}


def test_hibernate_renders_zero_pods_and_keeps_storage():
    values = build_values("db", parse_spec({**SEED, "hibernate": True}))
    assert values["replicas"] == 0
    assert values["storage"]["size"] == "100Gi"


def test_hash_is_stable_and_moves_with_values_and_chart():
    values = build_values("db", parse_spec(SEED))
    same = build_values("db", parse_spec(dict(SEED)))
    assert release_hash("chart-a", values) == release_hash("chart-a", same)
    assert release_hash("chart-a", values) != release_hash("chart-b", values)
    scaled = build_values("db", parse_spec({**SEED, "replicas": 5}))
    assert release_hash("chart-a", values) != release_hash("chart-a", scaled)

def test_resources_only_when_the_spec_gives_them():
    """Silent spec: no resources in the values, so the platform's or the chart's preset applies;
    spec.resources and spec.backup.resources reach the database and the backup Job."""
    silent = build_values("db", parse_spec(SEED))
    assert "resources" not in silent and "resources" not in silent["backup"]
    database = {"requests": {"cpu": "2"}}
    backup = {"limits": {"memory": "2Gi"}}
    values = build_values("db", parse_spec({**SEED, "resources": database,
                                            "backup": {**SEED["backup"], "resources": backup}}))
    assert values["resources"] == database
    assert values["backup"]["resources"] == backup


def test_the_owner_goes_in_last_and_only_when_given():
    spec = parse_spec(SEED)
    assert "owner" not in database_values("db", spec, Platform())  # helm template, render: no owner
    platform = Platform(values={"owner": {"uid": "someone-else"}})
    values = database_values("db", spec, platform, owner_uid="u-1")
    assert values["owner"] == {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "name": "db", "uid": "u-1"}


def test_the_operator_restarts_the_pods_and_passes_the_replication_mode():
    values = build_values("db", parse_spec({**SEED, "replication": {"synchronous": True}}))
    assert values["updateStrategy"] == "OnDelete"
    assert values["replication"] == {"synchronous": True}


def test_a_chart_that_does_not_declare_the_newer_values_is_not_given_them():
    """A database still on an older chart, or a platform's own chart: it would refuse unknown keys. A
    synchronous database on such a chart is refused instead of silently running asynchronous."""
    older = frozenset({"replicas", "image", "storage", "credentials", "roleLabel", "backup"})
    values = database_values("db", parse_spec(SEED), Platform(), chart_keys=older)
    assert "updateStrategy" not in values and "replication" not in values and "application" not in values
    assert database_values("db", parse_spec(SEED), Platform(), chart_keys=older | {"application"})["application"] == {
        "secretName": "db-app"}
    assert "updateStrategy" in database_values("db", parse_spec(SEED), Platform(), chart_keys=older | {"updateStrategy"})
    with pytest.raises(SpecError, match="does not take replication values") as refused:
        database_values("db", parse_spec({**SEED, "replication": {"synchronous": True}}), Platform(), chart_keys=older)
    assert refused.value.field == "replication.synchronous"


def test_the_archive_is_the_charts_default_and_only_turning_it_off_is_passed():
    """A chart before 0.8.0 takes no backup.continuous: the seed's values never name it."""
    assert "continuous" not in build_values("db", parse_spec(SEED))["backup"]
    dumps_only = {**SEED, "backup": {**SEED["backup"], "continuous": False}}
    assert build_values("db", parse_spec(dumps_only))["backup"]["continuous"] is False


def test_a_restore_to_a_moment_passes_the_moment_and_otherwise_nothing_new():
    restore = {"fromDatabase": "orders"}
    plain = build_values("copy", parse_spec({**SEED, "restore": restore}))
    assert plain["restore"] == {"enabled": True, "claimName": "orders-backups", "backup": "latest"}
    moment = parse_spec({**SEED, "restore": {**restore, "pointInTime": "2026-12-03T14:03:00Z"}})
    assert build_values("copy", moment)["restore"]["pointInTime"] == "2026-12-03T14:03:00Z"


def test_a_chart_before_the_archive_is_given_no_archive_values_and_a_moment_it_cannot_recover_to_is_refused():
    from mydb_operator.desired.values import value_keys
    older = value_keys({"replicas": 1, "backup": {"enabled": False, "schedule": ""}, "restore": {"enabled": False}})
    assert "backup.schedule" in older and "backup.continuous" not in older
    dumps_only = parse_spec({**SEED, "backup": {**SEED["backup"], "continuous": False}})
    assert "continuous" not in database_values("db", dumps_only, Platform(), chart_keys=older)["backup"]
    moment = parse_spec({**SEED, "restore": {"fromDatabase": "orders", "pointInTime": "2026-12-03T14:03:00Z"}})
    with pytest.raises(SpecError, match="cannot recover to a moment"):
        database_values("db", moment, Platform(), chart_keys=older)
    bundled = value_keys(__import__("yaml").safe_load(open("charts/mydatabase/values.yaml")))
    assert {"backup.continuous", "restore.pointInTime"} <= bundled
    assert database_values("db", dumps_only, Platform(), chart_keys=bundled)["backup"]["continuous"] is False


def test_a_dry_run_of_an_auto_grown_database_renders_the_size_its_claims_have():
    """`kubectl get mydb -o yaml | render -f -`: under storageAutoGrow, status.storage.size (what the operator
    applies) wins over a smaller spec.storage; without auto-grow, spec.storage is what is applied."""
    from mydb_operator.commands.render import values_for

    spec = {"replicas": 1, "version": "15.2", "storage": "1Gi", "storageAutoGrow": {"limit": "4Gi"}}
    grown = {"metadata": {"name": "db"}, "spec": spec, "status": {"storage": {"size": "1536Mi"}}}
    assert values_for(grown, Platform())["storage"]["size"] == "1536Mi"
    fresh = {"metadata": {"name": "db"}, "spec": spec}
    assert values_for(fresh, Platform())["storage"]["size"] == "1Gi"
    plain = {**grown, "spec": {k: v for k, v in spec.items() if k != "storageAutoGrow"}}
    assert values_for(plain, Platform())["storage"]["size"] == "1Gi"
