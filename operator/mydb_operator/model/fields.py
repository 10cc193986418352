"""A spec's fields read with errors that name them. Pure.

The CRD schema refuses wrong types at admission; these keep `render -f FILE`, which no API server checked, to
a SpecError naming the field instead of a traceback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SpecError


def section(spec: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = spec.get(name)
    if value is not None and not isinstance(value, Mapping):
        raise SpecError(name, f"must be a mapping, got {value!r}")
    return value


def integer(field_path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field_path, f"must be an integer, got {value!r}")
    return value


def text(given: Mapping[str, Any], key: str, field_path: str, default: str | None = None) -> str:
    """The string at KEY; absent (or null, which the API server prunes before defaulting): DEFAULT, or required."""
    value = given.get(key)
    if value is None and default is not None:
        return default
    if value is None:
        raise SpecError(field_path, "is required")
    if not isinstance(value, str):
        raise SpecError(field_path, f"must be a string, got {value!r}")
    return value
