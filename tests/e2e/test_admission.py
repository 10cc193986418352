"""Admission: the API server itself refuses bad MyDatabase input, with a message naming the field and the reason.

Only the CRD is installed (no operator): everything here is decided by the
CRD's OpenAPI schema and CEL rules in crds/, evaluated by a real
kube-apiserver. Each invalid case goes through `kubectl apply` exactly as a
user would run it (kubectl's default --validate=strict included) and must
come back refused, leave nothing behind (or the old spec untouched, for
updates), and print the field path and the reason. Positive controls prove
that the rules are not simply refusing everything: the seed CR, boundary
values, a storage grow, minor changes both ways and a later major are accepted;
an earlier major is refused with the supported path in the message.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from . import apiwrites
from .sharing import UNWATCHED_PREFIX, create_namespace
from .waiting import get_json, wait_for

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "production-db.yaml"
CRD_NAME = "mydatabases.myapp.example.com"
pytestmark = [pytest.mark.e2e, pytest.mark.no_operator]

VALID = {"replicas": 1, "version": "15.2", "storage": "1Gi"}
DAILY = {"schedule": "0 2 * * *"}


@pytest.fixture(scope="module")
def crd(cluster):
    """The CRD from crds/, installed and serving its current schema (no operator needed)."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")

    # A CRD that was already installed keeps being served with its old schema
    # for a moment after the update; wait until a rule of this version answers.
    def current_schema_served():
        probe = manifest({**VALID, "version": "12.4"})
        result = cluster.kubectl("create", "--dry-run=server", "-n", "default", "-f", "-",
                                 stdin=json.dumps(probe), check=False)
        return "unsupported PostgreSQL major" in result.stderr

    wait_for("the CRD's current schema to be served", current_schema_served, timeout=30)


@pytest.fixture(scope="module")
def corpus_namespace(cluster, crd):
    """One namespace for the whole invalid corpus (each case has its own object name).

    The cases store nothing but the valid starting points of the update cases,
    so they need no namespace each; sharing one keeps the module fast.
    """
    name = create_namespace(cluster, "admission-corpus", prefix=UNWATCHED_PREFIX)
    yield name
    apiwrites.delete_namespace(cluster.kubeconfig, name)


def object_name(case_id: str) -> str:
    """A valid, unique MyDatabase name for a parametrize id."""
    name = re.sub(r"[^a-z0-9]+", "-", case_id.lower()).strip("-")
    if len(name) > 40 or not name[:1].isalpha():
        name = f"c{hashlib.sha1(case_id.encode()).hexdigest()[:8]}-{name}"[:40].rstrip("-")
    return name


def manifest(spec: dict | None, name: str = "db") -> dict:
    body = {"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": name}}
    if spec is not None:
        body["spec"] = spec
    return body


def apply(cluster, namespace: str, body: dict, *flags: str):
    return cluster.kubectl("apply", "-n", namespace, *flags, "-f", "-", stdin=json.dumps(body), check=False)


def merged(base: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386): None removes a key, dicts merge, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Case:
    """spec: what is applied (a full spec; for an update, a merge patch onto `before`).

    expect: substrings the error must contain, the field path first.
    before: for an update, a valid spec created first.
    """

    spec: dict | None
    expect: tuple[str, ...]
    before: dict | None = None
    name: str | None = None  # default: derived from the case's id


def create(spec: dict | None, *expect: str, name: str | None = None) -> Case:
    return Case(spec=spec, expect=expect, name=name)


def update(before: dict, patch: dict, *expect: str) -> Case:
    return Case(spec=patch, expect=expect, before=before)


def with_(**changes) -> dict:
    return merged(VALID, changes)


CRON = "must be a 5-field cron expression (minute 0-59, hour 0-23, day of month 1-31, month 1-12, day of week 0-6)"
RETENTION = "retention must be a whole number above zero followed by h (hours), d (days) or w (weeks)"
VERSION_FORMAT = 'version must be "MAJOR.MINOR", a PostgreSQL release such as "15.2"'
NAME_RULE = "metadata.name must be at most 45 characters, start with a lowercase letter"

INVALID = [
    # --- replicas ------------------------------------------------------------
    pytest.param(create(with_(replicas=0), "spec.replicas", "should be greater than or equal to 1"), id="replicas-zero"),
    pytest.param(create(with_(replicas=-1), "spec.replicas", "should be greater than or equal to 1"),
                 id="replicas-negative"),
    pytest.param(create(with_(replicas=17), "spec.replicas", "should be less than or equal to 16"),
                 id="replicas-17-above-max"),
    pytest.param(create(with_(replicas=1000), "spec.replicas", "should be less than or equal to 16"),
                 id="replicas-1000-absurd"),
    pytest.param(create(with_(replicas=2**31), "spec.replicas", "should be less than or equal to 16"),
                 id="replicas-beyond-int32"),
    pytest.param(create(with_(replicas="three"), "spec.replicas", "must be of type integer"), id="replicas-word"),
    pytest.param(create(with_(replicas="3"), "spec.replicas", "must be of type integer"), id="replicas-numeric-string"),
    pytest.param(create(with_(replicas=1.5), "spec.replicas", "must be of type integer"), id="replicas-fraction"),
    pytest.param(create({"version": "15.2", "storage": "1Gi"}, "spec.replicas", "Required value"),
                 id="replicas-missing"),
    # --- version -------------------------------------------------------------
    pytest.param(create(with_(version="latest"), "spec.version", VERSION_FORMAT), id="version-latest"),
    pytest.param(create(with_(version="15"), "spec.version", VERSION_FORMAT), id="version-major-only"),
    pytest.param(create(with_(version="15.2.1"), "spec.version", VERSION_FORMAT), id="version-three-parts"),
    pytest.param(create(with_(version="v15.2"), "spec.version", VERSION_FORMAT), id="version-v-prefix"),
    pytest.param(create(with_(version="15.02"), "spec.version", VERSION_FORMAT), id="version-leading-zero-minor"),
    pytest.param(create(with_(version=""), "spec.version", VERSION_FORMAT), id="version-empty"),
    pytest.param(create(with_(version="15.2.1.1.1"), "spec.version", "Too long: may not be more than 8 bytes"),
                 id="version-too-long"),
    pytest.param(create(with_(version="12.4"), "spec.version",
                        "version 12.4 has an unsupported PostgreSQL major 12: supported majors are 13 to 17"),
                 id="version-major-12"),
    pytest.param(create(with_(version="18.0"), "spec.version",
                        "version 18.0 has an unsupported PostgreSQL major 18: supported majors are 13 to 17"),
                 id="version-major-18"),
    pytest.param(create(with_(version="9.6"), "spec.version", "unsupported PostgreSQL major 9"), id="version-major-9"),
    pytest.param(create(with_(version=15.2), "spec.version", "must be of type string"), id="version-unquoted-number"),
    # --- tls -----------------------------------------------------------------
    pytest.param(create(with_(tls={"enabled": False, "secretName": "mine"}), "spec.tls",
                        "tls.secretName names a certificate for TLS, which tls.enabled: false turns off"),
                 id="tls-secret-while-off"),
    pytest.param(create(with_(tls={"enabled": "yes"}), "spec.tls.enabled", "must be of type boolean"),
                 id="tls-enabled-word"),
    # --- storage -------------------------------------------------------------
    pytest.param(create(with_(storage="lots"), "spec.storage", "storage must be a Kubernetes quantity such as 100Gi"),
                 id="storage-word"),
    pytest.param(create(with_(storage="100GB"), "spec.storage", "storage must be a Kubernetes quantity such as 100Gi"),
                 id="storage-GB-unit"),
    pytest.param(create(with_(storage=""), "spec.storage", "storage must be a Kubernetes quantity such as 100Gi"),
                 id="storage-empty"),
    pytest.param(create(with_(storage="0"), "spec.storage", "storage must be at least 1Mi"), id="storage-zero"),
    pytest.param(create(with_(storage="-1Gi"), "spec.storage", "storage must be at least 1Mi"), id="storage-negative"),
    pytest.param(create(with_(storage="1Ki"), "spec.storage", "storage must be at least 1Mi"), id="storage-below-1Mi"),
    pytest.param(create(with_(storage=100), "spec.storage", "must be of type string"), id="storage-bare-number"),
    pytest.param(create(with_(backup={**DAILY, "storage": "0"}), "spec.backup.storage",
                        "backup.storage must be at least 1Mi"), id="backup-storage-zero"),
    pytest.param(create(with_(backup={**DAILY, "storage": "ten"}), "spec.backup.storage",
                        "backup.storage must be a Kubernetes quantity such as 10Gi"), id="backup-storage-word"),
    # --- failover ------------------------------------------------------------
    pytest.param(create(with_(replicas=1, replication={"synchronous": True}), "spec.replication.synchronous",
                        "replication.synchronous needs at least 2 replicas"), id="synchronous-single-instance"),
    pytest.param(create(with_(failoverDelay=-1), "spec.failoverDelay", "should be greater than or equal to 0"),
                 id="failover-delay-negative"),
    pytest.param(create(with_(maxLagOnFailover="a lot"), "spec.maxLagOnFailover",
                        "maxLagOnFailover must be a quantity of bytes such as 16Mi"), id="max-lag-word"),
    pytest.param(create(with_(maxLagOnFailover="-1Mi"), "spec.maxLagOnFailover", "maxLagOnFailover cannot be negative"),
                 id="max-lag-negative"),
    # --- backup schedule -----------------------------------------------------
    pytest.param(create(with_(backup={"schedule": "0 2 * *"}), "spec.backup.schedule", CRON),
                 id="schedule-4-fields"),
    pytest.param(create(with_(backup={"schedule": "0 2 * * * *"}), "spec.backup.schedule", CRON),
                 id="schedule-6-fields"),
    pytest.param(create(with_(backup={"schedule": "60 2 * * *"}), "spec.backup.schedule", CRON),
                 id="schedule-minute-60"),
    pytest.param(create(with_(backup={"schedule": "0 24 * * *"}), "spec.backup.schedule", CRON),
                 id="schedule-hour-24"),
    pytest.param(create(with_(backup={"schedule": "0 2 32 * *"}), "spec.backup.schedule", CRON),
                 id="schedule-day-32"),
    pytest.param(create(with_(backup={"schedule": "0 2 * 13 *"}), "spec.backup.schedule", CRON),
                 id="schedule-month-13"),
    pytest.param(create(with_(backup={"schedule": "every day"}), "spec.backup.schedule", CRON),
                 id="schedule-words"),
    pytest.param(create(with_(backup={"schedule": "0 2 * * MON"}), "spec.backup.schedule", CRON),
                 id="schedule-day-name"),
    pytest.param(create(with_(backup={"schedule": "@reboot"}), "spec.backup.schedule", CRON),
                 id="schedule-at-reboot"),
    pytest.param(create(with_(backup={"schedule": "0 22-2 * * *"}), "spec.backup.schedule",
                        "schedule ranges must run forwards"), id="schedule-range-backwards"),
    # --- backup retention, backup without schedule ---------------------------
    pytest.param(create(with_(backup={**DAILY, "retention": "7"}), "spec.backup.retention", RETENTION),
                 id="retention-no-unit"),
    pytest.param(create(with_(backup={**DAILY, "retention": "7m"}), "spec.backup.retention", RETENTION),
                 id="retention-minutes"),
    pytest.param(create(with_(backup={**DAILY, "retention": "0d"}), "spec.backup.retention", RETENTION),
                 id="retention-zero"),
    pytest.param(create(with_(backup={**DAILY, "retention": "1 d"}), "spec.backup.retention", RETENTION),
                 id="retention-space"),
    pytest.param(create(with_(backup={**DAILY, "retention": "7D"}), "spec.backup.retention", RETENTION),
                 id="retention-upper-case"),
    pytest.param(create(with_(backup={"retention": "7d"}), "spec.backup.schedule", "Required value"),
                 id="backup-without-schedule"),
    pytest.param(create(with_(backup={}), "spec.backup.schedule", "Required value"), id="backup-empty"),
    # --- deletionPolicy ------------------------------------------------------
    pytest.param(create(with_(deletionPolicy="delete"), "spec.deletionPolicy",
                        'Unsupported value: "delete": supported values: "Retain", "Delete"'),
                 id="deletionPolicy-lower-case"),
    pytest.param(create(with_(deletionPolicy="Orphan"), "spec.deletionPolicy",
                        'Unsupported value: "Orphan": supported values: "Retain", "Delete"'),
                 id="deletionPolicy-orphan"),
    # --- restore to a moment -------------------------------------------------
    pytest.param(create(with_(restore={"fromDatabase": "orders", "pointInTime": "yesterday at two"}),
                        "spec.restore.pointInTime", "must be of type date-time"), id="pointInTime-not-a-time"),
    pytest.param(create(with_(restore={"fromDatabase": "orders", "pointInTime": "2026-01-01T14:03:00Z",
                                       "backup": "20260101T020000Z.dump"}), "spec.restore",
                        "restore.pointInTime recovers from the source's continuous archive"),
                 id="pointInTime-with-a-named-dump"),
    # --- unknown fields (kubectl's default --validate=strict) ---------------
    pytest.param(create(with_(replica=3), 'unknown field "spec.replica"', "strict decoding error"),
                 id="unknown-field-spec-typo"),
    pytest.param(create(with_(backup={**DAILY, "keep": 3}), 'unknown field "spec.backup.keep"',
                        "strict decoding error"), id="unknown-field-in-backup"),
    # --- wrong types elsewhere -----------------------------------------------
    pytest.param(create(with_(hibernate="yes"), "spec.hibernate", "must be of type boolean"), id="hibernate-yes"),
    pytest.param(create(with_(postgresql={"parameters": {"max_connections": 200}}),
                        "spec.postgresql.parameters.max_connections", "must be of type string"),
                 id="parameter-integer"),
    pytest.param(create(with_(postgresql={"parameters": {"fsync": False}}),
                        "spec.postgresql.parameters.fsync", "must be of type string"), id="parameter-boolean"),
    pytest.param(create(with_(resources={"limits": {"memory": "1 Gi"}}), "spec.resources.limits.memory",
                        "should match"), id="resources-not-a-quantity"),
    pytest.param(create(None, "spec", "Required value"), id="spec-missing"),
    # --- the resource name ---------------------------------------------------
    pytest.param(create(VALID, NAME_RULE, "it names the StatefulSet", name="a" * 46), id="name-46-chars"),
    pytest.param(create(VALID, NAME_RULE, name="9lives"), id="name-starts-with-digit"),
    pytest.param(create(VALID, "metadata.name", "must be no more than 253 characters", name="a" * 254),
                 id="name-254-chars"),
    # --- updates: transition rules against oldSelf --------------------------
    pytest.param(update(with_(storage="100Gi"), {"storage": "50Gi"},
                        "spec.storage", "storage cannot shrink from 100Gi to 50Gi: a PersistentVolumeClaim can only grow"),
                 id="update-storage-shrink"),
    pytest.param(update(with_(storage="100Gi"), {"storage": "0.09Ti"},
                        "spec.storage", "storage cannot shrink from 100Gi to 0.09Ti"),
                 id="update-storage-shrink-other-unit"),
    pytest.param(update(with_(backup={**DAILY, "storage": "20Gi"}), {"backup": {"storage": "10Gi"}},
                        "spec.backup.storage", "backup.storage cannot shrink from 20Gi to 10Gi"),
                 id="update-backup-storage-shrink"),
    pytest.param(update(with_(backup={**DAILY, "storage": "20Gi"}), {"backup": {"storage": None}},
                        "spec.backup.storage", "backup.storage cannot shrink from 20Gi to 10Gi"),
                 id="update-backup-storage-removed-defaults-smaller"),
    pytest.param(update(with_(version="16.1"), {"version": "15.2"},
                        "spec.version", "version cannot go back a major (16.1 -> 15.2)",
                        "with spec.restore from a backup of this"),
                 id="update-major-downgrade"),
    pytest.param(update(with_(version="17.0"), {"version": "16.9"},
                        "spec.version", "version cannot go back a major (17.0 -> 16.9)"),
                 id="update-major-downgrade-higher-minor"),
    pytest.param(update(with_(storageClassName="fast"), {"storageClassName": "slow"},
                        "spec.storageClassName", "storageClassName is immutable"),
                 id="update-storageClassName-changed"),
    pytest.param(update(VALID, {"storageClassName": "fast"},
                        "spec.storageClassName", "storageClassName is immutable"),
                 id="update-storageClassName-added"),
    pytest.param(update(with_(storageClassName="fast"), {"storageClassName": None},
                        "spec.storageClassName", "storageClassName is immutable"),
                 id="update-storageClassName-removed"),
    pytest.param(update(VALID, {"replicas": 0}, "spec.replicas", "should be greater than or equal to 1"),
                 id="update-replicas-zero"),
]


@pytest.mark.parametrize("case", INVALID)
def test_invalid_input_is_refused_naming_the_field(cluster, corpus_namespace, request, case: Case):
    """The API server refuses the object, says where and why, and stores nothing (or keeps the old spec)."""
    namespace = corpus_namespace
    name = case.name or object_name(request.node.callspec.id)
    stored_before = None
    if case.before is not None:
        result = apply(cluster, namespace, manifest(case.before, name))
        assert result.returncode == 0, f"the valid starting point was refused:\n{result.stderr}"
        stored_before = get_json(cluster, "-n", namespace, "mydb", name)["spec"]
        body = manifest(merged(case.before, case.spec), name)
    else:
        body = manifest(case.spec, name)

    result = apply(cluster, namespace, body)

    assert result.returncode != 0, f"accepted, but should have been refused:\n{result.stdout}"
    for expected in case.expect:
        assert expected in result.stderr, f"{expected!r} missing from the error:\n{result.stderr}"
    if len(name) > 253:
        return  # not even a valid name to look up
    stored = get_json(cluster, "-n", namespace, "mydb", name)
    if stored_before is None:
        assert stored == {}, "a refused create left an object behind"
    else:
        assert stored["spec"] == stored_before, "a refused update changed the stored spec"


def test_invalid_corpus_size():
    """The issue asks for at least 30 invalid resources."""
    assert len(INVALID) >= 30


# --- unknown fields: refused by kubectl's default, pruned when validation is off ---


def test_unknown_field_refused_by_default_and_pruned_without_validation(cluster, crd, namespace):
    """kubectl apply's default is --validate=strict: unknown fields are an error.

    With --validate=false the request goes through and the API server prunes
    the unknown fields (the schema preserves none under spec), so they are
    absent when the object is read back.
    """
    body = manifest(with_(replica=3, backup={**DAILY, "keep": 3}), "loose")
    default = apply(cluster, namespace, body)
    strict = apply(cluster, namespace, body, "--validate=strict")
    assert default.returncode != 0 and strict.returncode != 0
    assert 'strict decoding error: unknown field "spec.backup.keep", unknown field "spec.replica"' in default.stderr
    assert default.stderr == strict.stderr
    assert get_json(cluster, "-n", namespace, "mydb", "loose") == {}

    lax = apply(cluster, namespace, body, "--validate=false")
    assert lax.returncode == 0, lax.stderr
    spec = get_json(cluster, "-n", namespace, "mydb", "loose")["spec"]
    assert "replica" not in spec and "keep" not in spec["backup"]
    assert spec == {**VALID, "backup": {**DAILY, "retention": "7d", "storage": "10Gi", "continuous": True, "verify": False},
                    "deletionPolicy": "Retain", "hibernate": False,
                    "failoverDelay": 3, "maxLagOnFailover": "16Mi"}


# --- positive controls -----------------------------------------------------------


def test_seed_is_accepted_with_defaults(cluster, crd, namespace):
    """examples/production-db.yaml (the seed, verbatim) is accepted; the schema fills in the defaults."""
    result = cluster.kubectl("apply", "-n", namespace, "-f", str(SEED), check=False)
    assert result.returncode == 0, result.stderr
    seed = yaml.safe_load(SEED.read_text())["spec"]
    spec = get_json(cluster, "-n", namespace, "mydb", "production-db")["spec"]
    assert spec == {**seed, "backup": {**seed["backup"], "storage": "10Gi", "continuous": True, "verify": False},
                    "deletionPolicy": "Retain", "hibernate": False,
                    "failoverDelay": 3, "maxLagOnFailover": "16Mi"}


@dataclass(frozen=True)
class Change:
    before: dict  # created first
    patch: dict  # merge patch; the result is applied and must be stored as sent


SEED_SPEC = {"replicas": 3, "version": "15.2", "storage": "100Gi", "backup": {"schedule": "0 2 * * *", "retention": "7d"}}


@pytest.mark.parametrize("change", [
    pytest.param(Change(SEED_SPEC, {"storage": "200Gi"}), id="storage-grow-100Gi-to-200Gi"),
    pytest.param(Change(SEED_SPEC, {"storage": "0.2Ti"}), id="storage-grow-other-unit"),
    pytest.param(Change(SEED_SPEC, {"version": "15.4"}), id="minor-change-15.2-to-15.4"),
    pytest.param(Change(SEED_SPEC, {"version": "15.1"}), id="minor-downgrade-15.2-to-15.1"),
    pytest.param(Change(SEED_SPEC, {"version": "17.6"}), id="major-upgrade-15.2-to-17.6"),
    pytest.param(Change(SEED_SPEC, {"backup": {"storage": "20Gi"}}), id="backup-storage-grow"),
    pytest.param(Change(SEED_SPEC, {"backup": None}), id="backup-removed"),
    pytest.param(Change({**SEED_SPEC, "storageClassName": "fast"}, {"replicas": 5}), id="same-storageClassName-kept"),
    pytest.param(Change(SEED_SPEC, {"hibernate": True, "deletionPolicy": "Delete"}), id="hibernate-and-delete-policy"),
])
def test_allowed_update_is_accepted(cluster, crd, namespace, change: Change):
    """Updates the rules must not block are accepted by the API server and stored as sent."""
    created = apply(cluster, namespace, manifest(change.before))
    assert created.returncode == 0, created.stderr
    result = apply(cluster, namespace, manifest(merged(change.before, change.patch)))
    assert result.returncode == 0, f"refused:\n{result.stderr}"
    spec = get_json(cluster, "-n", namespace, "mydb", "db")["spec"]
    for key, value in change.patch.items():
        if value is None:
            assert key not in spec
        elif isinstance(value, dict):
            assert value.items() <= spec[key].items()
        else:
            assert spec[key] == value


@pytest.mark.parametrize("spec, name", [
    pytest.param(with_(replicas=16), "db", id="replicas-16"),
    pytest.param(with_(version="13.0"), "db", id="version-13.0"),
    pytest.param(with_(version="17.99"), "db", id="version-17.99"),
    pytest.param(with_(storage="1Mi"), "db", id="storage-1Mi"),
    pytest.param(with_(storage="1.5Ti"), "db", id="storage-1.5Ti"),
    pytest.param(with_(backup={"schedule": "@weekly", "retention": "12h", "storage": "1Mi"}), "db",
                 id="backup-weekly-12h"),
    pytest.param(with_(backup={"schedule": "*/15 8-18 1,15 */2 1-5", "retention": "4w"}), "db",
                 id="backup-cron-ranges-steps-lists"),
    pytest.param(with_(postgresql={"parameters": {"max_connections": "200", "fsync": "on"}},
                       resources={"limits": {"cpu": 2, "memory": "1Gi"}, "requests": {"cpu": "500m"}}), "db",
                 id="parameters-and-resources"),
    pytest.param(VALID, "a" * 45, id="name-45-chars"),
    pytest.param(with_(backup={**DAILY, "continuous": False},
                       restore={"fromDatabase": "orders", "pointInTime": "2026-01-01T14:03:00.25+01:00"}), "db",
                 id="dumps-only-and-a-restore-to-a-moment-with-an-offset"),
    pytest.param(with_(replicas=2, replication={"synchronous": True}, failoverDelay=0, maxLagOnFailover="0"), "db",
                 id="synchronous-two-instances-failover-at-once"),
])
def test_boundary_values_are_accepted(cluster, crd, namespace, spec: dict, name: str):
    """The edges of each rule are inside it: the refusals above are not a blanket no."""
    result = apply(cluster, namespace, manifest(spec, name))
    assert result.returncode == 0, result.stderr
    assert get_json(cluster, "-n", namespace, "mydb", name) != {}


# --- the cron language: the same table the operator's check is tested against ---
CRON_CASES = yaml.safe_load((REPO / "tests" / "cron_schedules.yaml").read_text())


@pytest.mark.parametrize("schedule", CRON_CASES["accepted"])
def test_schedules_the_operator_accepts_are_admitted(cluster, crd, corpus_namespace, schedule: str):
    result = apply(cluster, corpus_namespace, manifest(with_(backup={"schedule": schedule})), "--dry-run=server")
    assert result.returncode == 0, f"{schedule!r} refused:\n{result.stderr}"


@pytest.mark.parametrize("schedule", [case["schedule"] for case in CRON_CASES["refused"]])
def test_schedules_the_operator_refuses_are_refused_at_admission(cluster, crd, corpus_namespace, schedule: str):
    result = apply(cluster, corpus_namespace, manifest(with_(backup={"schedule": schedule})), "--dry-run=server")
    assert result.returncode != 0, f"{schedule!r} admitted, but the operator refuses it"
    assert "spec.backup.schedule" in result.stderr, result.stderr
