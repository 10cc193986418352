"""The credentials Secret: created once with strong random passwords, never rotated silently."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

from .. import names

SUPERUSER, REPLICATION_USER = "postgres", "replicator"
VERIFY_FULL = "?sslmode=verify-full"
REQUIRED_KEYS = ("username", "password", "replication-username", "replication-password")


def missing_keys(secret: dict[str, Any]) -> list[str]:
    """Keys the chart needs that a user-supplied Secret lacks."""
    present = set(secret.get("data") or {}) | set(secret.get("stringData") or {})
    return [key for key in REQUIRED_KEYS if key not in present]


def connection_uri(user: str, password: str, host: str, port: int = names.POSTGRES_PORT, tls: bool = False) -> str:
    """To the `postgres` database on the servers' port (desired/values.postgres_port); with TLS, verifying
    the server's certificate and name (libpq then wants the CA: sslrootcert, or PGSSLROOTCERT)."""
    uri = f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@{host}:{port}/postgres"
    return f"{uri}{VERIFY_FULL}" if tls else uri


def new_password() -> str:
    # 32 URL-safe characters: ~190 bits, and safe inside a connection URI.
    return secrets.token_urlsafe(24)


def credentials_update(files: dict[str, bytes], ca: bytes = b"") -> dict[str, str | None]:
    """The keys the operator's credentials Secret (its decoded FILES) must change to follow the servers, its
    passwords kept. With CA (TLS on): `ca.crt`, so a client can verify them; the URIs stay as they were made
    (an older one without sslmode takes TLS unverified, libpq's default: rewriting it would break a client that
    has no CA yet). TLS off: no `ca.crt` (None: the key goes), and URIs without sslmode=verify-full, which a
    plain server would fail. Empty when nothing changes."""
    if ca:
        wanted: dict[str, str | None] = {"ca.crt": ca.decode()}
    else:
        wanted = {"ca.crt": None} if "ca.crt" in files else {}
        for key in ("uri", "uri-ro"):
            uri = files.get(key, b"").decode()
            if VERIFY_FULL in uri:
                wanted[key] = uri.replace(VERIFY_FULL, "")
    held = {key: value.decode() for key, value in files.items()}
    return {key: value for key, value in wanted.items() if held.get(key) != value}


def credentials_secret(
    namespace: str, release: str, port: int = names.POSTGRES_PORT, ca: bytes = b""
) -> dict[str, Any]:
    """A new Secret body; its passwords exist only here and in the API server. `port`: the servers'
    (desired/values.postgres_port), which the URIs name. CA: the servers' CA (TLS on), which a client
    mounting this Secret verifies them with (`ca.crt`); the URIs then ask for sslmode=verify-full."""
    tls = bool(ca)
    password = new_password()
    read_write = names.service_host(namespace, names.read_write_service(release))
    read_only = names.service_host(namespace, names.read_only_service(release))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": names.credentials_secret_name(release),
            "namespace": namespace,
            "labels": {**names.selector_labels(release), names.MANAGED_BY_LABEL: names.OPERATOR_NAME},
        },
        "type": "Opaque",
        "stringData": {
            "username": SUPERUSER,
            "password": password,
            "replication-username": REPLICATION_USER,
            "replication-password": new_password(),
            # Ready-made connection strings for the read-write and read-only Services.
            "uri": connection_uri(SUPERUSER, password, read_write, port, tls),
            "uri-ro": connection_uri(SUPERUSER, password, read_only, port, tls),
            **({"ca.crt": ca.decode()} if tls else {}),
        },
    }
