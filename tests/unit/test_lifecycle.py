"""Pure lifecycle decisions: storage growth, version policy, operation names, pending restarts, warnings."""

from mydb_operator.desired.credentials import connection_uri, credentials_secret, missing_keys
from mydb_operator.model.spec import parse_spec
from mydb_operator.model.statefulset import claim_template_size, image_tag, pending_restart, running_version
from mydb_operator.policy.operations import applied_summary, operation_kind
from mydb_operator.policy.storage import claims_short_of, storage_plan
from mydb_operator.policy.version_change import version_refusal
from mydb_operator.status.warnings import warnings_for

SPEC = parse_spec({"replicas": 3, "version": "15.4", "storage": "200Gi"})


def sts(image="postgres:15.2", size="100Gi", revision="r2"):
    return {"spec": {"template": {"spec": {"containers": [{"name": "postgres", "image": image}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"resources": {"requests": {"storage": size}}}}]},
            "status": {"updateRevision": revision}}


def test_running_version_and_template_size_come_from_the_statefulset():
    assert running_version(sts("docker.io/library/postgres:15.2")) == "15.2"
    assert claim_template_size(sts(size="5Gi")) == "5Gi"
    assert running_version(None) is None and claim_template_size(None) is None


DIGEST = "sha256:" + "ab" * 32


def test_an_image_tag_is_read_past_a_registry_port_and_before_a_digest():
    assert image_tag("postgres:15.2") == "15.2"
    assert image_tag("localhost:5000/mydb/postgres:17") == "17"
    assert image_tag(f"localhost:5000/mydb/postgres:15.2@{DIGEST}") == "15.2"
    assert image_tag("localhost:5000/mydb/postgres") is None
    assert image_tag(f"localhost:5000/mydb/postgres@{DIGEST}") is None


def test_a_digest_pinned_image_still_gives_its_version_and_a_foreign_tag_gives_none():
    assert running_version(sts(f"registry.example:5000/pg/postgres:15.2@{DIGEST}")) == "15.2"
    assert running_version(sts(f"registry.example:5000/pg/postgres@{DIGEST}")) is None
    assert running_version(sts("registry.example/pg/postgres:15-custom")) is None


def test_minor_changes_both_ways_and_a_later_major_are_allowed_an_earlier_major_is_not():
    assert version_refusal(SPEC, "15.2") is None
    assert version_refusal(parse_spec({"replicas": 1, "version": "15.1", "storage": "1Gi"}), "15.4") is None
    assert version_refusal(SPEC, None) is None
    assert version_refusal(SPEC, "14.9") is None  # a major upgrade (policy/major_upgrade.py)
    refusal = version_refusal(SPEC, "16.1")
    assert "goes back a major" in refusal and "spec.restore" in refusal


def test_storage_growth_plan():
    grow = storage_plan(SPEC, "100Gi", expansion_allowed=True)
    assert (grow.grow, grow.chart_size, grow.refusal) == (True, "200Gi", None)
    same = storage_plan(SPEC, "0.1953125Ti", expansion_allowed=None)  # 200Gi written otherwise
    assert (same.grow, same.refusal) == (False, None)
    blocked = storage_plan(SPEC, "100Gi", expansion_allowed=False)
    assert (blocked.grow, blocked.chart_size) == (False, "100Gi")
    assert "does not allow volume expansion" in blocked.refusal
    shrink = storage_plan(SPEC, "300Gi", expansion_allowed=True)
    assert (shrink.grow, shrink.chart_size) == (False, "300Gi") and "cannot shrink" in shrink.refusal
    fresh = storage_plan(SPEC, None, expansion_allowed=None)
    assert (fresh.grow, fresh.chart_size) == (False, "200Gi")


def test_claims_short_of_size():
    claims = [{"metadata": {"name": "b"}, "status": {"capacity": {"storage": "100Gi"}}},
              {"metadata": {"name": "a"}, "status": {"capacity": {"storage": "200Gi"}}},
              {"metadata": {"name": "c"}, "status": {}}]
    assert claims_short_of(claims, "200Gi") == ["b", "c"]


def test_operation_names():
    base = applied_summary(parse_spec({"replicas": 3, "version": "15.2", "storage": "1Gi"}))
    assert operation_kind(None, base) == "Install"
    assert operation_kind(base, {**base, "replicas": 5}) == "Scale"
    assert operation_kind(base, {**base, "storage": "2Gi"}) == "Resize"
    assert operation_kind(base, {**base, "version": "15.4"}) == "VersionChange"
    assert operation_kind(base, {**base, "hibernate": True}) == "Hibernate"
    assert operation_kind({**base, "hibernate": True}, base) == "Wake"
    assert operation_kind(base, {**base, "backup": True}) == "Upgrade"
    assert operation_kind(base, base) == "Upgrade"  # the chart or other values changed
    assert operation_kind(base, base, repair=True) == "Repair"


def test_pending_restart_lists_pods_on_an_old_revision():
    pods = [{"metadata": {"name": "db-0", "labels": {"controller-revision-hash": "r1"}}},
            {"metadata": {"name": "db-1", "labels": {"controller-revision-hash": "r2"}}}]
    assert pending_restart(sts(revision="r2"), pods) == ["db-0"]
    assert pending_restart(None, pods) == []


def test_credentials_secret_keys_and_uris():
    secret = credentials_secret("prod", "db")
    data = secret["stringData"]
    assert missing_keys(secret) == []
    assert data["password"] != data["replication-password"] and len(data["password"]) >= 32
    assert data["uri"] == f"postgresql://postgres:{data['password']}@db.prod.svc:5432/postgres"
    assert data["uri-ro"].startswith(f"postgresql://postgres:{data['password']}@db-ro.prod.svc:5432/")
    assert missing_keys({"data": {"username": "x", "password": "y"}}) == ["replication-username",
                                                                          "replication-password"]
    assert connection_uri("a b", "p@ss/word", "h") == "postgresql://a%20b:p%40ss%2Fword@h:5432/postgres"


def cond(type_, status, reason, message):
    return {"type": type_, "status": status, "reason": reason, "message": message}


def test_warnings_fire_once_per_new_problem():
    healthy = {"conditions": [cond("Degraded", "False", "Healthy", "no failures")]}
    failing = {"conditions": [cond("Degraded", "True", "HelmFailed", "boom")]}
    assert warnings_for(healthy, failing) == [("Warning", "HelmFailed", "boom")]
    assert warnings_for(failing, failing) == []
    blocked = {"conditions": [cond("Resizing", "False", "ExpansionNotSupported", "no")]}
    assert warnings_for(healthy, blocked) == [("Warning", "ExpansionNotSupported", "no")]
    assert warnings_for(blocked, blocked) == []


def test_a_full_volume_warns_when_other_pods_fill_not_when_its_figures_move():
    """CI saw 8 DiskFull Warnings for one episode: each top-up changed the message's figures."""
    def full(pods, words):
        return {"conditions": [cond("Degraded", "True", "DiskFull", f"data volume full ({words})")],
                "storage": {"full": [{"pod": pod, "capacity": "1Gi"} for pod in pods]}}
    healthy = {"conditions": [cond("Degraded", "False", "Healthy", "no failures")]}
    replica = full(["db-1"], "db-1: 98% used")
    assert warnings_for(healthy, replica) == [("Warning", "DiskFull", "data volume full (db-1: 98% used)")]
    assert warnings_for(replica, full(["db-1"], "db-1: 99% used")) == []
    both = full(["db-0", "db-1"], "db-0: its server stopped; db-1: 99% used")
    assert [w[1] for w in warnings_for(replica, both)] == ["DiskFull"]
    assert warnings_for(both, full(["db-0", "db-1"], "db-0: 99% used; db-1: 99% used")) == []


def test_no_eligible_replica_warns_once_while_the_reasons_of_the_replicas_move():
    """The primary down with no replica to promote is one problem: a replica behind in one pass and not answering
    in the next (a NetworkPolicy resync dropped a probe) made a second Warning for the same episode."""
    def stuck(why):
        return {"conditions": [cond("Degraded", "True", "NoEligibleReplica", f"no replica can take over: {why}")]}
    healthy = {"conditions": [cond("Degraded", "False", "Healthy", "no failures")]}
    behind = stuck("db-1 is 4619712 bytes behind")
    assert [w[1] for w in warnings_for(healthy, behind)] == ["NoEligibleReplica"]
    assert warnings_for(behind, stuck("db-1 did not answer (no answer in time)")) == []
