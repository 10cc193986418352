"""The credentials Secret: created once with strong random passwords, never rotated silently."""

from __future__ import annotations

import secrets
from typing import Any

from . import api
from .values import credentials_secret_name

SUPERUSER, REPLICATION_USER = "postgres", "replicator"


def new_password() -> str:
    # 32 URL-safe characters: ~190 bits, and safe inside a connection URI.
    return secrets.token_urlsafe(24)


def credentials_secret(release: str, namespace: str) -> dict[str, Any]:
    """A new Secret body; its passwords exist only here and in the API server."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": credentials_secret_name(release),
            "namespace": namespace,
            "labels": {**api.selector_labels(release), "app.kubernetes.io/managed-by": "mydb-operator"},
        },
        "type": "Opaque",
        "stringData": {
            "username": SUPERUSER,
            "password": new_password(),
            "replication-username": REPLICATION_USER,
            "replication-password": new_password(),
        },
    }
