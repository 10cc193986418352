"""parse_spec: the seed parses, defaults apply, and what the schema cannot catch is refused by name."""

from pathlib import Path

import pytest
import yaml

from mydb_operator.model.errors import SpecError
from mydb_operator.model.spec import parse_spec

SEED = {"replicas": 3, "version": "15.2", "storage": "100Gi",
        "backup": {"schedule": "0 2 * * *", "retention": "7d"}}
# The cron language's cases, shared with the API server's test (tests/e2e/test_admission.py).
CRON = yaml.safe_load((Path(__file__).parent.parent / "cron_schedules.yaml").read_text())


def test_seed_spec_parses_with_defaults():
    spec = parse_spec(SEED)
    assert (spec.replicas, spec.version, spec.storage, spec.major) == (3, "15.2", "100Gi", 15)
    assert spec.deletion_policy == "Retain"
    assert spec.hibernate is False
    assert spec.backup.schedule == "0 2 * * *" and spec.backup.retention == "7d"
    assert spec.backup.storage == "10Gi"


@pytest.mark.parametrize("schedule", CRON["accepted"])
def test_valid_schedules(schedule):
    assert parse_spec({**SEED, "backup": {"schedule": schedule}}).backup.schedule == schedule


@pytest.mark.parametrize("schedule, words", [(case["schedule"], case["why"]) for case in CRON["refused"]])
def test_impossible_schedules_name_the_field(schedule, words):
    with pytest.raises(SpecError) as error:
        parse_spec({**SEED, "backup": {"schedule": schedule}})
    assert error.value.field == "backup.schedule"
    assert words in str(error.value)


@pytest.mark.parametrize("field, value", [
    ("version", "12.4"), ("version", "15"), ("storage", "lots"), ("storage", "0"), ("replicas", 0),
    ("deletionPolicy", "Shred"),
    # As the CRD: at most 16 replicas and 3600 s, a size of at least 1Mi in the API server's grammar.
    ("replicas", 17), ("failoverDelay", 3601), ("storage", "1Ki"), ("storage", "1 Gi"), ("storage", "Infinity"),
    ("maxLagOnFailover", "Infinity"), ("maxLagOnFailover", ""),
])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(SpecError) as error:
        parse_spec({**SEED, field: value})
    assert error.value.field == field


def test_missing_required_field():
    with pytest.raises(SpecError, match="spec.storage: is required"):
        parse_spec({"replicas": 1, "version": "15.2"})


@pytest.mark.parametrize("changes, field, words", [
    ({"replicas": "three"}, "replicas", "must be an integer, got 'three'"),
    ({"replicas": True}, "replicas", "must be an integer, got True"),
    ({"backup": {"retention": "7d"}}, "backup.schedule", "is required"),
    ({"backup": {"schedule": 5}}, "backup.schedule", "must be a string, got 5"),
    ({"backup": {"schedule": "@daily", "retention": 7}}, "backup.retention", "must be a string, got 7"),
    ({"backup": {"schedule": "@daily", "retention": ""}}, "backup.retention", "is not like 7d"),
    ({"backup": {"schedule": "@daily", "retention": "10000000d"}}, "backup.retention", "is not like 7d"),
    ({"backup": "daily"}, "backup", "must be a mapping, got 'daily'"),
    ({"restore": {"backup": "latest"}}, "restore.fromDatabase", "is required"),
    ({"scheduling": ["a"]}, "scheduling", "must be a mapping"),
])
def test_wrong_shapes_name_the_field(changes, field, words):
    """What the CRD schema refuses at admission, for a spec no API server checked (`render -f FILE`)."""
    with pytest.raises(SpecError) as error:
        parse_spec({**SEED, **changes})
    assert error.value.field == field
    assert words in str(error.value)
