"""One short SQL session with one server: a pod's address, the database's superuser, tight timeouts.

Every call opens and closes its own connection: the operator talks to a
server only while a decision needs it (a pass that saw something change, a
resync), never holds one open, and a hung server costs one timeout, not a
stuck pool."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg

CONNECT_SECONDS = 2.0  # a server that does not answer the startup packet by then is taken as hung
COMMAND_SECONDS = 5.0
# InternalClientError: asyncpg's protocol caught out by a server that goes away mid-statement (a pod being
# deleted): a server that did not answer, not a crash of the pass.
FAILURES = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)


@dataclass(frozen=True)
class Login:
    user: str
    password: str
    ca: bytes = b""  # the CA the servers' certificate is verified with (PEM); empty: TLS is off


class _PodNameContext(ssl.SSLContext):
    """Verifies the server's certificate for a name given here, not the address connected to: the operator
    connects to a pod's IP (read from the API server; no certificate names an IP that changes), and the name
    checked is the pod's DNS name, which the database's certificate carries. asyncio's TLS (asyncpg's) makes its
    session with wrap_bio, with the address as the hostname: the pod's name goes in its place."""

    pod_host = ""

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        kwargs["server_hostname"] = self.pod_host
        return super().wrap_bio(*args, **kwargs)


def tls_context(ca: bytes, pod_host: str) -> ssl.SSLContext:
    """verify-full against the pod: the chain to the database's CA, and POD_HOST among the certificate's names
    (a certificate for another server from the same issuer is refused)."""
    context = _PodNameContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=ca.decode())
    context.pod_host = pod_host
    return context


@dataclass(frozen=True)
class Server:
    pod: str
    address: str  # the pod's IP
    port: int
    host: str = ""  # the pod's DNS name, which its certificate must carry
    tls: bool = False  # the pod serves TLS (it mounts a certificate): the session is encrypted and verified


@asynccontextmanager
async def session(
    server: Server, login: Login, database: str = "postgres", connect_seconds: float = CONNECT_SECONDS
) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(
        host=server.address,
        port=server.port,
        user=login.user,
        password=login.password,
        database=database,
        timeout=connect_seconds,
        command_timeout=COMMAND_SECONDS,
        # search_path pinned: no function or operator a database owner creates is ever resolved in place of the
        # catalog's (every name the operator uses is pg_catalog's).
        server_settings={"application_name": "mydb-operator", "search_path": "pg_catalog"},
        ssl=tls_context(login.ca, server.host) if server.tls and login.ca else None,
    )
    try:
        yield connection
    finally:
        await connection.close(timeout=CONNECT_SECONDS)


def failure_text(error: BaseException) -> str:
    """One line for status and logs: the server's message, or what kept it from answering."""
    if isinstance(error, TimeoutError):
        return "no answer in time"
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text
