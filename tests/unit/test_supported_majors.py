"""The supported PostgreSQL majors live in one list (model/versions.py); the CRD must say the same.

The CRD cannot import Python, so this test holds it to the list: its `pattern`,
its CEL rule and the words of its messages, and the operator's own pattern."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mydb_operator.model.versions import SUPPORTED_MAJORS, VERSION_PATTERN, supported_range

CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "mydatabases.myapp.example.com.yaml"
CANDIDATE_MAJORS = range(100)
MINORS = ["0", "1", "9", "10", "99", "100", "01", "", "x"]


@pytest.fixture(scope="module")
def version_schema() -> dict:
    crd = yaml.safe_load(CRD_PATH.read_text())
    (v1,) = crd["spec"]["versions"]
    return v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["version"]


def accepted_majors(pattern: str) -> set[int]:
    return {major for major in CANDIDATE_MAJORS if re.search(pattern, f"{major}.0")}


def test_the_crd_pattern_accepts_exactly_the_supported_majors(version_schema: dict) -> None:
    assert accepted_majors(version_schema["pattern"]) == set(SUPPORTED_MAJORS)


def test_the_operator_pattern_agrees_with_the_crd_on_every_version(version_schema: dict) -> None:
    crd_pattern = re.compile(version_schema["pattern"])
    for major in CANDIDATE_MAJORS:
        for minor in MINORS:
            version = f"{major}.{minor}"
            assert bool(crd_pattern.search(version)) == bool(VERSION_PATTERN.match(version)), version


def test_the_crd_major_rule_accepts_exactly_the_supported_majors(version_schema: dict) -> None:
    """The CEL rule that names an unsupported major in words: `... || self.matches('^1[3-7][.]')`."""
    (rule,) = [r for r in version_schema["x-kubernetes-validations"] if "unsupported" in r["message"]]
    major_check = re.findall(r"self\.matches\('([^']*)'\)", rule["rule"])[-1]
    assert accepted_majors(major_check) == set(SUPPORTED_MAJORS)


def test_the_crd_says_the_supported_majors_in_words(version_schema: dict) -> None:
    words = f"{SUPPORTED_MAJORS[0]} to {SUPPORTED_MAJORS[-1]}"
    (rule,) = [r for r in version_schema["x-kubernetes-validations"] if "unsupported" in r["message"]]
    assert f"supported majors are {words}" in rule["message"]
    assert f"supported majors are {words}" in rule["messageExpression"]
    assert f"Supported majors are {words}." in version_schema["description"]
    assert supported_range() == f"{SUPPORTED_MAJORS[0]}.x to {SUPPORTED_MAJORS[-1]}.x"


def test_the_operator_charts_platform_majors_take_exactly_the_supported_ones() -> None:
    """The operator chart's values schema checks a platform's `majors` (desired/platform.py) before the
    operator sees them: the same range."""
    import json

    schema = json.loads((CRD_PATH.parents[1] / "charts" / "mydatabase-operator" / "values.schema.json").read_text())
    items = schema["properties"]["platform"]["properties"]["majors"]["items"]
    assert range(items["minimum"], items["maximum"] + 1) == SUPPORTED_MAJORS


def test_the_operator_charts_pinned_versions_are_the_versions_the_operator_reads() -> None:
    """imageDigests' keys in the operator chart's schema accept exactly the versions VERSION_PATTERN does."""
    import json

    schema = json.loads((CRD_PATH.parents[1] / "charts" / "mydatabase-operator" / "values.schema.json").read_text())
    keys = re.compile(schema["properties"]["platform"]["properties"]["imageDigests"]["propertyNames"]["pattern"])
    for major in CANDIDATE_MAJORS:
        for minor in MINORS:
            version = f"{major}.{minor}"
            assert bool(keys.search(version)) == bool(VERSION_PATTERN.match(version)), version
