"""What the operator makes a server do: promote it, point a replica at another primary, gather statistics, keep
the application's role and database."""

from __future__ import annotations

from ..model.scram import verifier, verifies
from .connection import Login, Server, session

PROMOTE_SECONDS = 60
ANALYZE_SECONDS = 3600  # one database's ANALYZE after a major upgrade: minutes on a large one


async def promote(server: Server, login: Login) -> bool:
    """pg_promote() and wait for it; then a checkpoint, so the new timeline is in the control file,
    where pg_rewind of a former primary reads it. False when the server did not finish promoting in time."""
    async with session(server, login) as connection:
        promoted = await connection.fetchval(
            "select pg_promote(true, $1)", PROMOTE_SECONDS, timeout=PROMOTE_SECONDS + 5
        )
        if promoted:
            await connection.execute("checkpoint", timeout=PROMOTE_SECONDS)
    return bool(promoted)


async def repoint(server: Server, login: Login, conninfo: str) -> None:
    """ALTER SYSTEM SET primary_conninfo and a reload: the WAL receiver reconnects at once (PostgreSQL 13+)."""
    literal = "'" + conninfo.replace("'", "''") + "'"
    async with session(server, login) as connection:
        await connection.execute(f"alter system set primary_conninfo = {literal}")
        await connection.execute("select pg_reload_conf()")


async def create_slot(server: Server, login: Login, slot: str) -> None:
    """A physical replication slot reserving WAL from now; nothing when it exists (a replica's start made it)."""
    async with session(server, login) as connection:
        await connection.execute(
            "select pg_create_physical_replication_slot($1, true)"
            " where not exists (select 1 from pg_replication_slots where slot_name = $1)",
            slot,
        )


async def drop_slot(server: Server, login: Login, slot: str) -> None:
    """Drop the slot unless a replica streams through it now."""
    async with session(server, login) as connection:
        await connection.execute(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1 and not active",
            slot,
        )


async def use_slot(server: Server, login: Login, slot: str) -> None:
    """ALTER SYSTEM SET primary_slot_name and a reload: the WAL receiver reconnects through it (PostgreSQL 13+)."""
    async with session(server, login) as connection:
        await connection.execute(f"alter system set primary_slot_name = '{slot}'")
        await connection.execute("select pg_reload_conf()")


async def reload(server: Server, login: Login) -> bool:
    """pg_reload_conf(): the server reads its certificate files (and its configuration) again."""
    async with session(server, login) as connection:
        return bool(await connection.fetchval("select pg_reload_conf()"))


async def analyze(server: Server, login: Login) -> bool:
    """ANALYZE in every database that takes connections: pg_upgrade carries no planner statistics over, and
    until they are gathered again the planner guesses."""
    async with session(server, login) as connection:
        databases = [
            row["datname"] for row in await connection.fetch("select datname from pg_database where datallowconn")
        ]
    for database in databases:
        async with session(server, login, database) as connection:
            await connection.execute("analyze", timeout=ANALYZE_SECONDS)
    return True


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def keep_owner(server: Server, login: Login, owner: str, database: str, password: str) -> list[str]:
    """The application's role, logging in with PASSWORD (set as a SCRAM verifier, never in clear, and not again
    while the stored one verifies it), and its DATABASE owned by it; what had to be done ([]: nothing)."""
    done: list[str] = []
    role = identifier(owner)
    async with session(server, login) as connection:
        stored = await connection.fetchrow("select rolpassword from pg_authid where rolname = $1", owner)
        if stored is None:
            await connection.execute(
                f"create role {role} login nosuperuser nocreatedb nocreaterole noreplication nobypassrls "
                f"password '{verifier(password)}'"
            )
            done.append(f"role {owner} created")
        elif not verifies(stored["rolpassword"], password):
            await connection.execute(f"alter role {role} login password '{verifier(password)}'")
            done.append(f"role {owner}'s password set from its Secret")
        if not await connection.fetchval("select exists (select 1 from pg_database where datname = $1)", database):
            await connection.execute(f"create database {identifier(database)} owner {role}")
            done.append(f"database {database} created, owned by {owner}")
    return done
