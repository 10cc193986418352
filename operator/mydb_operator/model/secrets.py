"""A Secret as the API serves it: its data (base64) decoded, and whose it is. Pure."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .. import names


def secret_files(secret: dict[str, Any] | None) -> dict[str, bytes]:
    """A Secret's data, decoded; keys whose value is not base64 are left out."""
    files: dict[str, bytes] = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        try:
            files[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
    return files


def made_by_the_operator(secret: dict[str, Any], release: str) -> bool:
    """The Secret carries the labels the operator puts on the Secrets it makes for RELEASE."""
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return labels.get(names.MANAGED_BY_LABEL) == names.OPERATOR_NAME and labels.get(names.INSTANCE_LABEL) == release


def taken(found: dict[str, dict[str, Any] | None], release: str) -> list[str]:
    """Of the Secrets FOUND by name (None: absent), those that exist and are not the operator's for RELEASE:
    someone else's, which the operator never writes."""
    return sorted(
        name for name, secret in found.items() if secret is not None and not made_by_the_operator(secret, release)
    )


def name_taken_message(namespace: str, secrets: list[str]) -> str:
    listed = ", ".join(secrets)
    return (
        f"Secret {listed} in namespace {namespace} exists and is not this database's (no label "
        f"{names.MANAGED_BY_LABEL}={names.OPERATOR_NAME} for it): the operator never writes it. Rename the "
        "database, or move that Secret away"
    )
