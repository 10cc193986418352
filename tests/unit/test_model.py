"""parse_spec: the seed parses, defaults apply, and what the schema cannot catch is refused by name."""

import pytest

from mydb_operator.model.errors import SpecError
from mydb_operator.model.spec import parse_spec

SEED = {"replicas": 3, "version": "15.2", "storage": "100Gi",
        "backup": {"schedule": "0 2 * * *", "retention": "7d"}}


def test_seed_spec_parses_with_defaults():
    spec = parse_spec(SEED)
    assert (spec.replicas, spec.version, spec.storage, spec.major) == (3, "15.2", "100Gi", 15)
    assert spec.deletion_policy == "Retain"
    assert spec.hibernate is False
    assert spec.backup.schedule == "0 2 * * *" and spec.backup.retention == "7d"
    assert spec.backup.storage == "10Gi"


@pytest.mark.parametrize("schedule", ["0 2 * * *", "*/5 * * * *", "0 0 1,15 * 1-5", "@daily", "0 3 * jan-mar sun"])
def test_valid_schedules(schedule):
    assert parse_spec({**SEED, "backup": {"schedule": schedule}}).backup.schedule == schedule


@pytest.mark.parametrize("schedule, words", [
    ("61 2 * * *", "out of range for the minute field"),
    ("0 24 * * *", "out of range for the hour field"),
    ("0 2 0 * *", "out of range for the day of month field"),
    ("0 2 * 13 *", "out of range for the month field"),
    ("0 2 * * 8", "out of range for the day of week field"),
    ("0 2 * *", "must have 5 fields"),
    ("0 5-2 * * *", "runs backwards"),
    ("*/0 * * * *", "bad step"),
    ("0 2 * * funday", "is not a value of the day of week field"),
])
def test_impossible_schedules_name_the_field(schedule, words):
    with pytest.raises(SpecError) as error:
        parse_spec({**SEED, "backup": {"schedule": schedule}})
    assert error.value.field == "backup.schedule"
    assert words in str(error.value)


@pytest.mark.parametrize("field, value", [
    ("version", "12.4"), ("version", "15"), ("storage", "lots"), ("storage", "0"), ("replicas", 0),
    ("deletionPolicy", "Shred"),
])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(SpecError) as error:
        parse_spec({**SEED, field: value})
    assert error.value.field == field


def test_missing_required_field():
    with pytest.raises(SpecError, match="spec.storage: is required"):
        parse_spec({"replicas": 1, "version": "15.2"})
