"""Kubernetes quantities ("100Gi") as numbers.

The one place pure code borrows from the kubernetes client (an import-linter
contract allows it here only): its parser is the API server's own grammar."""

from __future__ import annotations

from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity as _parse_quantity


def parse_quantity(text: str) -> Decimal:
    """The quantity's value; ValueError when `text` is not a quantity."""
    value: Decimal = _parse_quantity(text)
    return value
