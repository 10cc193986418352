"""Cron schedules in the one language the CRD's CEL rules accept.

The language is the CRD's (crds/, spec.backup.schedule): an @shortcut, or five
fields separated by spaces, each a comma list of `*` (`?` in the two day
fields), `n` or `a-b` with a <= b, optionally `/step` (1-99); numbers only, with
at most as many digits as the field's highest value. tests/cron_schedules.yaml
holds the cases both this check and the API server are tested against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SpecError

CRON_SHORTCUTS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


@dataclass(frozen=True)
class CronField:
    name: str
    low: int
    high: int
    wildcards: str  # the characters that mean "every value"

    @property
    def digits(self) -> int:
        return len(str(self.high))


CRON_FIELDS = (
    CronField("minute", 0, 59, "*"),
    CronField("hour", 0, 23, "*"),
    CronField("day of month", 1, 31, "*?"),
    CronField("month", 1, 12, "*"),
    CronField("day of week", 0, 6, "*?"),
)
FIELD_SEPARATOR = re.compile(" +")
STEP = re.compile(r"[1-9][0-9]?")


def check_cron(field_path: str, expression: str) -> None:
    """Raise SpecError, naming the field and the fault, for a schedule outside the language."""
    if expression in CRON_SHORTCUTS:
        return
    parts = FIELD_SEPARATOR.split(expression)  # a space before or after makes an empty sixth field
    if len(parts) != len(CRON_FIELDS):
        raise SpecError(
            field_path,
            f"{expression!r} must have 5 fields (minute hour day month weekday) "
            f"separated by spaces, or be one of {', '.join(CRON_SHORTCUTS)}",
        )
    for part, field in zip(parts, CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_item(field_path, field, item)


def _check_item(field_path: str, field: CronField, item: str) -> None:
    body, slash, step = item.partition("/")
    if slash and not STEP.fullmatch(step):
        raise SpecError(field_path, f"bad step {step!r} in the {field.name} field (a number from 1 to 99)")
    if len(body) == 1 and body in field.wildcards:
        return
    bounds = body.split("-")
    if len(bounds) > 2:
        raise SpecError(field_path, f"bad range {body!r} in the {field.name} field")
    values = [_value(field_path, field, bound) for bound in bounds]
    if len(values) == 2 and values[0] > values[1]:
        raise SpecError(field_path, f"range {body!r} in the {field.name} field runs backwards")


def _value(field_path: str, field: CronField, bound: str) -> int:
    if not (bound.isascii() and bound.isdigit()) or len(bound) > field.digits:
        raise SpecError(
            field_path,
            f"{bound!r} is not a value of the {field.name} field "
            f"(numbers {field.low}-{field.high}; names are not accepted)",
        )
    value = int(bound)
    if not field.low <= value <= field.high:
        raise SpecError(field_path, f"{value} is out of range for the {field.name} field ({field.low}-{field.high})")
    return value
