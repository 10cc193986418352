"""Cron schedules checked as the CronJob controller would: five fields, each in range."""

from __future__ import annotations

from .errors import SpecError

CRON_SHORTCUTS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    # name, lowest, highest, names allowed in place of numbers
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, WEEKDAYS),
)


def check_cron(field_path: str, expression: str) -> None:
    """Refuse what the CronJob controller would refuse: wrong arity or values out of range."""
    if expression.strip().lower() in CRON_SHORTCUTS:
        return
    parts = expression.split()
    if len(parts) != len(CRON_FIELDS):
        raise SpecError(field_path, f"{expression!r} must have 5 fields (minute hour day month weekday)")
    for part, (name, low, high, names) in zip(parts, CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_cron_item(field_path, name, item, low, high, names)


def _check_cron_item(field_path: str, name: str, item: str, low: int, high: int, names: tuple[str, ...]) -> None:
    body, _, step = item.partition("/")
    if step and (not step.isdigit() or int(step) == 0):
        raise SpecError(field_path, f"bad step {step!r} in the {name} field")
    if body in ("*", "?"):
        return
    bounds = body.split("-")
    if len(bounds) > 2:
        raise SpecError(field_path, f"bad range {body!r} in the {name} field")
    values = []
    for bound in bounds:
        if bound.lower() in names:
            values.append(names.index(bound.lower()) + (1 if low == 1 else 0))
        elif bound.isdigit():
            values.append(int(bound))
        else:
            raise SpecError(field_path, f"{bound!r} is not a value of the {name} field")
    for value in values:
        if not low <= value <= high:
            raise SpecError(field_path, f"{value} is out of range for the {name} field ({low}-{high})")
    if len(values) == 2 and values[0] > values[1]:
        raise SpecError(field_path, f"range {body!r} in the {name} field runs backwards")
