"""Kubernetes quantities ("100Gi") as numbers.

The one place pure code borrows from the kubernetes client (an import-linter
contract allows it here only). Its parser takes more than the API server does
(spaces, "Infinity"), so a text must first match the API server's grammar:
QUANTITY_PATTERN, which the CRD writes as the pattern of a resource quantity
(tests/chart/test_one_source.py holds the two equal)."""

from __future__ import annotations

import re
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity as _parse_quantity

QUANTITY_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def parse_quantity(text: str) -> Decimal:
    """The quantity's value; ValueError when `text` is not a quantity the API server would take."""
    if not isinstance(text, str) or QUANTITY_PATTERN.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    value: Decimal = _parse_quantity(text)
    return value
