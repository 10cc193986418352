"""The operator's own SQL session (instances/connection.py) against a real PostgreSQL over TLS: the certificate
is checked for the name given for the pod, not the address connected to, and search_path is pinned to
pg_catalog, so nothing a database owner creates resolves in place of the catalog's."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from mydb_operator.instances.connection import Login, Server, session

from .harness import loopback_certificates


def ask(primary, host: str, sql: str) -> str:
    secret = primary.machine.secret
    login = Login(secret["username"], secret["password"], loopback_certificates()["ca.crt"].encode())

    async def answer() -> str:
        async with session(Server("db-0", primary.ip, primary.machine.port, host, tls=True), login) as connection:
            return str(await connection.fetchval(sql))
    return asyncio.run(answer())


def test_the_operator_verifies_the_pods_name_and_pins_search_path(primary):
    # The loopback certificate names the pods' IP addresses (harness.loopback_certificates): as their name here.
    assert ask(primary, primary.ip, "show search_path") == "pg_catalog"
    assert ask(primary, primary.ip, "select current_setting('ssl_library') is not null and "
               "(select ssl from pg_stat_ssl where pid = pg_backend_pid())") == "True"
    # The same server, its chain valid, but its certificate does not name the pod asked for: refused.
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|IP address mismatch"):
        ask(primary, "db-0.db-headless.ns.svc", "select 1")
