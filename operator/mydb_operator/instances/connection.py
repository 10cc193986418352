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


def tls_context(ca: bytes) -> ssl.SSLContext:
    """TLS that verifies the server's chain against the database's CA. Not its name: the operator connects
    to a pod's IP, which it read from the API server, and no certificate names an IP that changes."""
    context = ssl.create_default_context(cadata=ca.decode())
    context.check_hostname = False
    return context


@dataclass(frozen=True)
class Server:
    pod: str
    address: str  # the pod's IP
    port: int
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
        server_settings={"application_name": "mydb-operator"},
        ssl=tls_context(login.ca) if server.tls and login.ca else None,
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
