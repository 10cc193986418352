"""Kubernetes quantities ("100Gi") as numbers.

QUANTITY_PATTERN is the API server's grammar of a quantity, which the CRD writes as the pattern of a
resource quantity (tests/chart/test_one_source.py holds the two equal); a text that matches it is a
number and a suffix, read here. (The kubernetes client's parser takes more than the API server does, and
importing it loaded the whole client into every `mydb-operator render` and `values`.)"""

from __future__ import annotations

import re
from decimal import Decimal

QUANTITY_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


# The suffixes as powers: of 1024 (binary) and of 10 (decimal); an exponent ("1e3") Decimal reads itself.
BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(text: str) -> Decimal:
    """The quantity's value; ValueError when `text` is not a quantity the API server would take. Pure."""
    found = QUANTITY_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    suffix = found.group(6) or ""
    number = text[: len(text) - len(suffix)]
    if suffix in BINARY_SUFFIXES:
        return Decimal(number) * Decimal(1024) ** BINARY_SUFFIXES[suffix]
    if suffix in DECIMAL_SUFFIXES:
        return Decimal(number).scaleb(DECIMAL_SUFFIXES[suffix])
    return Decimal(text)
