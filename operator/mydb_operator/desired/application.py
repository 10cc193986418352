"""The application's Secret (`<name>-app`): the application role's login in the layout clients expect. Pure.

Made once by the operator with a random password; the password is the user's to change (the operator sets
the role's password from it), and every other key follows from it and from the spec: the operator writes
them again when they differ (a new CA, a password changed by hand, another owner or database)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .. import names
from .credentials import VERIFY_FULL

BASIC_AUTH = "kubernetes.io/basic-auth"  # username and password keys: what tools that read logins look for


def _pgpass_field(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def application_keys(
    owner: str, password: str, database: str, hosts: tuple[str, str], port: int, ca: bytes
) -> dict[str, str]:
    """Every key of the Secret for OWNER's PASSWORD on DATABASE, through HOSTS (read-write, read-only). With CA
    (TLS on), `ca.crt` and URIs that verify the server's certificate and name (sslmode=verify-full)."""
    read_write, read_only = hosts
    user, secret = quote(owner, safe=""), quote(password, safe="")
    tls = VERIFY_FULL if ca else ""
    keys = {
        "username": owner,
        "password": password,
        "dbname": database,
        "host": read_write,
        "port": str(port),
        "uri": f"postgresql://{user}:{secret}@{read_write}:{port}/{database}{tls}",
        "uri-ro": f"postgresql://{user}:{secret}@{read_only}:{port}/{database}{tls}",
        "jdbc-uri": f"jdbc:postgresql://{read_write}:{port}/{database}?user={user}&password={secret}"
        + ("&sslmode=verify-full" if ca else ""),
        "pgpass": ":".join(_pgpass_field(v) for v in (read_write, str(port), database, owner, password)) + "\n",
    }
    if ca:
        keys["ca.crt"] = ca.decode()
    return keys


def application_secret(namespace: str, release: str, keys: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": names.application_secret_name(release),
            "namespace": namespace,
            "labels": {**names.selector_labels(release), names.MANAGED_BY_LABEL: names.OPERATOR_NAME},
        },
        "type": BASIC_AUTH,
        "stringData": keys,
    }


def application_changes(files: dict[str, bytes], keys: dict[str, str]) -> dict[str, str | None]:
    """What the stored Secret (its decoded FILES) must change to hold KEYS (None: the key goes: `ca.crt` once TLS
    is off)."""
    changes: dict[str, str | None] = {k: v for k, v in keys.items() if files.get(k) != v.encode()}
    if "ca.crt" in files and "ca.crt" not in keys:
        changes["ca.crt"] = None
    return changes
