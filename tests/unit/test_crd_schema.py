"""What the MyDatabase CRD promises, checked without a cluster.

The CRD in crds/ is the single source of the API. These tests read it as data
and prove that the seed custom resource fits it, that kubectl sees the columns
and scale paths the design names, that `kubectl explain` has a description for
every spec field, and that the regexes accept and refuse what they should.

The API server evaluates `pattern` with Go's RE2 and CEL's matches() with RE2
as well; the patterns here are written without constructs whose meaning
differs between RE2, ECMA-262 and Python (no \\d, \\w, \\s, \\b, no
lookaround, no inline flags), so Python's re gives the same answers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "mydatabases.myapp.example.com.yaml"
# The seed resource exactly as the design quotes it, the same file make demo applies.
SEED_PATH = ROOT / "examples" / "production-db.yaml"


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD_PATH.read_text())


@pytest.fixture(scope="module")
def version(crd) -> dict:
    (v1,) = crd["spec"]["versions"]
    return v1


@pytest.fixture(scope="module")
def root_schema(version) -> dict:
    return version["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def spec_schema(root_schema) -> dict:
    return root_schema["properties"]["spec"]


@pytest.fixture(scope="module")
def seed() -> dict:
    return yaml.safe_load(SEED_PATH.read_text())


def schema_at(schema: dict, dotted: str) -> dict:
    for part in dotted.split("."):
        schema = schema["properties"][part]
    return schema


def matches(pattern: str, value: str) -> bool:
    """Search like RE2/ECMA do for an anchored pattern.

    Python's `$` also matches before a final newline; RE2 and ECMA-262 do not.
    No test value ends in a newline, and this guard keeps it that way.
    """
    assert not value.endswith("\n")
    return re.search(pattern, value) is not None


def schedule_regex(spec_schema: dict) -> str:
    rules = schema_at(spec_schema, "backup.schedule")["x-kubernetes-validations"]
    found = [
        m.group(1)
        for r in rules
        if (m := re.fullmatch(r"self\.matches\('([^']*)'\)", r["rule"].strip()))
    ]
    assert len(found) == 1, "expected exactly one self.matches('...') rule on schedule"
    return found[0]


# --- identity -----------------------------------------------------------------


def test_names_scope_and_single_storage_version(crd, version):
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "mydatabases.myapp.example.com"
    assert spec["group"] == "myapp.example.com"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "MyDatabase"
    assert spec["names"]["plural"] == "mydatabases"
    assert spec["names"]["singular"] == "mydatabase"
    assert spec["names"]["shortNames"] == ["mydb"]
    assert spec["names"]["categories"] == ["all", "databases"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)


# --- the seed resource fits the schema ----------------------------------------


def _undeclared(value, schema: dict, path: str) -> list[str]:
    """Paths in value that the schema does not declare (or types it refuses)."""
    problems = []
    kind = schema.get("type")
    if isinstance(value, dict):
        if kind != "object":
            return [f"{path}: object given, schema type {kind!r}"]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                problems += _undeclared(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                problems += _undeclared(sub, extra, f"{path}.{key}")
            else:
                problems.append(f"{path}.{key}: not declared")
    elif isinstance(value, bool):
        if kind != "boolean":
            problems.append(f"{path}: boolean given, schema type {kind!r}")
    elif isinstance(value, int):
        if kind != "integer" and not schema.get("x-kubernetes-int-or-string"):
            problems.append(f"{path}: integer given, schema type {kind!r}")
    elif isinstance(value, str):
        if kind != "string" and not schema.get("x-kubernetes-int-or-string"):
            problems.append(f"{path}: string given, schema type {kind!r}")
    return problems


def test_every_seed_spec_field_is_declared_with_a_matching_type(seed, spec_schema):
    assert _undeclared(seed["spec"], spec_schema, "spec") == []


def test_seed_has_every_required_spec_field(seed, spec_schema):
    assert set(spec_schema["required"]) == {"replicas", "version", "storage"}
    assert set(spec_schema["required"]) <= set(seed["spec"])
    assert set(schema_at(spec_schema, "backup")["required"]) <= set(seed["spec"]["backup"])


def test_seed_values_satisfy_the_constraints(seed, spec_schema):
    s = seed["spec"]
    replicas = schema_at(spec_schema, "replicas")
    assert replicas["minimum"] <= s["replicas"] <= replicas["maximum"]
    assert matches(schema_at(spec_schema, "version")["pattern"], s["version"])
    assert matches(schema_at(spec_schema, "backup.retention")["pattern"], s["backup"]["retention"])
    assert matches(schedule_regex(spec_schema), s["backup"]["schedule"])
    assert len(s["storage"]) <= schema_at(spec_schema, "storage")["maxLength"]


# --- kubectl: columns, scale, explain -----------------------------------------


def test_printer_columns(version):
    columns = [(c["name"], c["jsonPath"], c["type"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Replicas", ".spec.replicas", "integer"),
        ("Ready", ".status.readyReplicas", "integer"),
        ("Version", ".status.version", "string"),
        ("Phase", ".status.phase", "string"),
        ("Primary", ".status.primary", "string"),
        ("Node", ".status.primaryNode", "string"),
        ("Age", ".metadata.creationTimestamp", "date"),
    ]
    # The primary and its node with -o wide only: `kubectl get mydb` stays as narrow as it was.
    assert [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority")] == ["Primary", "Node"]


def test_printer_column_paths_exist_in_the_schema(version, root_schema):
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".")
        if path.startswith("metadata."):
            continue
        schema_at(root_schema, path)  # KeyError if the column points nowhere


def test_status_and_scale_subresources(version, root_schema):
    sub = version["subresources"]
    assert sub["status"] == {}
    assert sub["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert schema_at(root_schema, "spec.replicas")["type"] == "integer"
    assert schema_at(root_schema, "status.replicas")["type"] == "integer"
    assert schema_at(root_schema, "status.selector")["type"] == "string"


def _properties(schema: dict, path: str):
    for name, sub in schema.get("properties", {}).items():
        yield f"{path}.{name}", sub
        yield from _properties(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _properties(schema["items"], f"{path}[]")


def test_every_spec_and_status_property_has_a_description(root_schema):
    missing = [
        path
        for top in ("spec", "status")
        for path, sub in _properties(root_schema["properties"][top], top)
        if not sub.get("description", "").strip()
    ]
    assert missing == []
    assert root_schema["properties"]["spec"]["description"].strip()


# --- structural schema ----------------------------------------------------------


def _preserve_unknown_paths(schema: dict, path: str):
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        yield path
    for name, sub in schema.get("properties", {}).items():
        yield from _preserve_unknown_paths(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _preserve_unknown_paths(schema[key], f"{path}.{key}")


def test_unknown_fields_are_kept_only_where_meant(root_schema):
    """Only kopf's own status and the pass-through core/v1 Affinity keep fields the schema does not list."""
    assert sorted(_preserve_unknown_paths(root_schema, "")) == [".spec.scheduling.affinity", ".status.kopf"]


def test_conditions_are_a_map_list_keyed_by_type(root_schema):
    conditions = schema_at(root_schema, "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert {"type", "status"} <= set(item["required"])
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"


def test_every_spec_string_is_bounded(spec_schema):
    """CEL cost estimates need a maxLength (or enum) on every string."""
    unbounded = [
        path
        for path, sub in _properties(spec_schema, "spec")
        if sub.get("type") == "string" and "maxLength" not in sub and "enum" not in sub
    ]
    assert unbounded == []
    parameters = schema_at(spec_schema, "postgresql.parameters")
    assert parameters["maxProperties"] == 64
    assert parameters["additionalProperties"] == {"type": "string", "maxLength": 256}


def test_defaults(spec_schema):
    policy = schema_at(spec_schema, "deletionPolicy")
    assert policy["enum"] == ["Retain", "Delete"]
    assert policy["default"] == "Retain"
    assert schema_at(spec_schema, "hibernate")["default"] is False
    retention = schema_at(spec_schema, "backup.retention")
    assert retention["default"] == "7d"
    assert matches(retention["pattern"], retention["default"])
    assert schema_at(spec_schema, "backup.storage")["default"] == "10Gi"


def test_storage_fields_are_checked_as_quantities_that_never_shrink(spec_schema):
    for field in ("storage", "backup.storage"):
        rules = [r["rule"] for r in schema_at(spec_schema, field)["x-kubernetes-validations"]]
        assert "isQuantity(self)" in rules, field
        assert any("quantity(oldSelf)" in r and ">= 0" in r for r in rules), field
    storage_rules = schema_at(spec_schema, "storage")["x-kubernetes-validations"]
    assert storage_rules[0]["message"] == "storage must be a Kubernetes quantity such as 100Gi"


def test_major_change_and_storage_class_change_are_transition_rules(root_schema, spec_schema):
    rules = spec_schema["x-kubernetes-validations"]
    by_path = {r.get("fieldPath"): r for r in rules}
    # spec.version's is on the whole object: it may go back to the major that runs while status.upgrade says
    # the data is untouched, which a rule on spec cannot read.
    version = next(r for r in root_schema["x-kubernetes-validations"] if r.get("fieldPath") == ".spec.version")
    assert "oldSelf.spec.version" in version["rule"] and "oldSelf.status.upgrade.fromVersion" in version["rule"]
    assert "with spec.restore from a backup of this one" in version["message"]
    assert "oldSelf.storageClassName" in by_path[".storageClassName"]["rule"]
    assert "storageClassName is immutable" in by_path[".storageClassName"]["message"]


# --- regexes ----------------------------------------------------------------------

# Constructs whose meaning differs between RE2, ECMA-262 and Python.
NON_PORTABLE = [r"\d", r"\w", r"\s", r"\b", "(?", r"\Z", r"\A", r"\z"]


def all_patterns(root_schema, spec_schema):
    found = [sub["pattern"] for _, sub in _properties(root_schema, "") if "pattern" in sub]
    found += [
        sub["additionalProperties"]["pattern"]
        for _, sub in _properties(root_schema, "")
        if isinstance(sub.get("additionalProperties"), dict) and "pattern" in sub["additionalProperties"]
    ]
    return found + [schedule_regex(spec_schema)]


def test_patterns_are_portable_between_re2_ecma_and_python(root_schema, spec_schema):
    patterns = all_patterns(root_schema, spec_schema)
    assert len(patterns) >= 5  # version, retention, limits, requests, schedule
    for pattern in patterns:
        assert pattern.startswith("^") and pattern.endswith("$"), pattern
        for construct in NON_PORTABLE:
            assert construct not in pattern, (construct, pattern)
        re.compile(pattern)


VERSIONS_OK = [f"{major}.{minor}" for major in range(13, 18) for minor in range(10)] + [
    "15.2",
    "16.10",
    "17.99",
]
VERSIONS_BAD = ["15", "12.1", "18.0", "15.2.1", "latest", "15.02", "v15.2", "15.", ".2", "9.6", "15.2 "]


@pytest.mark.parametrize("value", VERSIONS_OK)
def test_version_pattern_accepts(spec_schema, value):
    assert matches(schema_at(spec_schema, "version")["pattern"], value)


@pytest.mark.parametrize("value", VERSIONS_BAD)
def test_version_pattern_rejects(spec_schema, value):
    assert not matches(schema_at(spec_schema, "version")["pattern"], value)


@pytest.mark.parametrize("value", ["7d", "12h", "4w", "1h", "30d", "52w"])
def test_retention_pattern_accepts(spec_schema, value):
    assert matches(schema_at(spec_schema, "backup.retention")["pattern"], value)


@pytest.mark.parametrize("value", ["7", "7m", "0d", "7 d", "07d", "d", "-1d", "7D", "7dd"])
def test_retention_pattern_rejects(spec_schema, value):
    assert not matches(schema_at(spec_schema, "backup.retention")["pattern"], value)


SCHEDULES_OK = [
    "0 2 * * *",
    "*/5 * * * *",
    "0 0 1,15 * 1-5",
    "@daily",
    "@hourly",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "@midnight",
    "59 23 31 12 6",
    "0-30/10 8-18/2 */2 1-6 0",
    "15 3 ? * 1,3,5",
    "0  2 * * *",
]
SCHEDULES_BAD = [
    "0 2 * *",
    "every day",
    "0 2 * * * *",
    "60 2 * * *",
    "0 24 * * *",
    "0 2 0 * *",
    "0 2 32 * *",
    "0 2 * 13 *",
    "0 2 * * 7",
    "*/0 * * * *",
    "@reboot",
    "@every 1h",
    "TZ=UTC 0 2 * * *",
    " 0 2 * * *",
    "0 2 * * * ",
    "0 2 * * MON",
    "0,,5 2 * * *",
    "",
]


@pytest.mark.parametrize("value", SCHEDULES_OK)
def test_schedule_regex_accepts(spec_schema, value):
    assert matches(schedule_regex(spec_schema), value)


@pytest.mark.parametrize("value", SCHEDULES_BAD)
def test_schedule_regex_rejects(spec_schema, value):
    assert not matches(schedule_regex(spec_schema), value)


@pytest.mark.parametrize("value", ["100Gi", "1Mi", "500M", "1.5Ti", "1e9", "250m", "2"])
def test_resource_quantity_pattern_accepts(spec_schema, value):
    pattern = schema_at(spec_schema, "resources.limits")["additionalProperties"]["pattern"]
    assert matches(pattern, value)


@pytest.mark.parametrize("value", ["1 Gi", "Gi", "1GB", "one", "1.2.3"])
def test_resource_quantity_pattern_rejects(spec_schema, value):
    pattern = schema_at(spec_schema, "resources.requests")["additionalProperties"]["pattern"]
    assert not matches(pattern, value)
