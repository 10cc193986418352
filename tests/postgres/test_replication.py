"""Streaming replication as the StatefulSet sets it up: entrypoint.sh for ordinal 0 and 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import DatabasePod, wait_for


def test_ordinal_1_streams_from_ordinal_0(primary, replica):
    """entrypoint.sh with the pod env of ordinal 0 makes a writable primary, and with
    ordinal 1 (PRIMARY_HOST = ordinal 0) a clone of it that stays in recovery, is
    seen streaming in the primary's pg_stat_replication, receives rows written on
    the primary afterwards, and refuses writes."""
    assert primary.sql("SELECT pg_is_in_recovery()") == "f"
    assert replica.sql("SELECT pg_is_in_recovery()") == "t"
    # A clone, not a second initdb: both report the same system identifier.
    system_id = "SELECT system_identifier FROM pg_control_system()"
    assert replica.sql(system_id) == primary.sql(system_id)

    primary.sql("CREATE TABLE replication_check (id int PRIMARY KEY, note text);"
                "INSERT INTO replication_check SELECT i, md5(i::text) FROM generate_series(1, 250) i")
    digest = "SELECT count(*), md5(string_agg(note, ',' ORDER BY id)) FROM replication_check"
    expected = primary.sql(digest)
    assert expected.startswith("250|")
    wait_for("the rows to reach the replica",
             lambda: replica.sql("SELECT to_regclass('replication_check') IS NOT NULL") == "t"
             and replica.sql(digest) == expected, timeout=20)

    user = primary.machine.secret["replication-username"]
    wait_for("one streaming sender on the primary", lambda: primary.sql(
        "SELECT usename, state FROM pg_stat_replication").splitlines() == [f"{user}|streaming"])
    assert replica.sql("SELECT status FROM pg_stat_wal_receiver") == "streaming"
    # The WAL receiver's connection gives up on a silent primary in seconds, not after the kernel's 130 s,
    # names the replica, and reads its password from a file.
    conninfo = replica.sql("SHOW primary_conninfo")
    for option in ("tcp_user_timeout=10000", "keepalives_idle=10", "keepalives_interval=5", "keepalives_count=3",
                   f"application_name={replica.name}", "passfile="):
        assert option in conninfo, conninfo
    assert "password=" not in conninfo, conninfo
    secret = primary.machine.secret
    assert secret["replication-password"] not in (replica.pgdata / "postgresql.auto.conf").read_text()
    # No password in the environment of either server (the credentials are files).
    for pod in (primary, replica):
        environ = Path(f"/proc/{pod.proc.pid}/environ").read_bytes().decode(errors="replace")
        assert "postgres" in Path(f"/proc/{pod.proc.pid}/cmdline").read_bytes().decode(), pod.name
        for key in ("password", "replication-password"):
            assert secret[key] not in environ, f"{pod.name}: {key} in the server's environment"

    refused = primary.machine.psql(replica.ip, "INSERT INTO replication_check VALUES (0, 'x')")
    assert refused.returncode != 0 and "read-only transaction" in refused.stderr, refused.stderr


def test_pods_restart_on_their_data(primary, replica):
    """A restarted pod (same volume, same env) comes back on its existing data
    directory: entrypoint.sh skips initdb/pg_basebackup, rewrites the chart's
    settings file over the read-only copy the previous start left, and the replica
    streams again, receiving rows written after the restart."""
    primary.sql("CREATE TABLE restart_check (id int PRIMARY KEY)")
    for pod in (replica, primary):
        pod.stop()
    for pod in (primary, replica):
        pod.start()
    assert "already initialised" in primary.logs() and "already initialised" in replica.logs()
    assert replica.sql("SELECT pg_is_in_recovery()") == "t"
    primary.sql("INSERT INTO restart_check SELECT generate_series(1, 40)")
    wait_for("rows written after the restart to reach the replica",
             lambda: replica.sql("SELECT count(*) FROM restart_check") == "40", timeout=20)


def test_a_replica_is_cloned_by_its_init_container_before_its_server_starts(request, machine, rendered, primary,
                                                                            replica):
    """A new ordinal's init container (entrypoint.sh init) clones the primary and exits 0 with no server left
    running; the server's container (entrypoint.sh serve) then starts on that clone, cloning nothing, and streams.
    The clone is thus out of the startup probe's reach, however long it takes."""
    pod = DatabasePod(machine, rendered, 2)
    request.addfinalizer(pod.stop)
    assert [init.command[-1] for init in pod.init_containers] == ["init"]
    assert pod.container.command[-1] == "serve"
    assert pod.initialise(timeout=60) == 0, pod.logs()
    assert "replica-bootstrap: cloned" in pod.logs()
    assert (pod.pgdata / "PG_VERSION").exists() and (pod.pgdata / "standby.signal").exists()
    assert not (pod.pgdata / "postmaster.pid").exists() and not pod.leftovers(), pod.leftovers()

    offset = len(pod.logs())
    pod.start(init=False)
    assert "replica-bootstrap" not in pod.logs()[offset:]
    user = primary.machine.secret["replication-username"]
    assert replica.sql("SELECT pg_is_in_recovery()") == "t"  # the first sender (a fixture: any worker, any order)
    wait_for("two streaming senders on the primary", lambda: primary.sql(
        "SELECT usename, state FROM pg_stat_replication").splitlines() == [f"{user}|streaming"] * 2)


@pytest.mark.parametrize("ordinal", [0, 1], ids=["primary", "replica"])
def test_the_server_container_never_makes_a_cluster(request, machine, rendered, ordinal):
    """On an empty data volume (wiped while its pod lived, so no init container ran) the server's container
    exits 1, saying so, and makes nothing: no empty primary served to clients (no RESTORE_FROM reaches it),
    no clone cut short by the startup probe."""
    empty = machine.sibling(f"empty-{ordinal}")
    pod = DatabasePod(empty, rendered, ordinal)
    request.addfinalizer(pod.stop)
    code, served = pod.start_expecting_exit(init=False)
    assert code == 1 and not served, (code, pod.logs())
    assert "holds no cluster" in pod.logs() and "delete the pod" in pod.logs(), pod.logs()
    assert list(pod.home.rglob("PG_VERSION")) == []


def test_tcp_is_tls_only_and_the_replica_verifies_its_primary(primary, replica):
    """With the chart's TLS Secret mounted, the server takes TCP connections over TLS only: a plain one is
    refused by pg_hba.conf, the replica streams over TLS with verify-full against the CA, and a client with
    libpq's default (sslmode=prefer) is encrypted."""
    wait_for("the replica streaming", lambda: replica.sql("SELECT status FROM pg_stat_wal_receiver") == "streaming")
    user = primary.machine.secret["replication-username"]
    assert primary.sql("SELECT usename, ssl FROM pg_stat_replication JOIN pg_stat_ssl USING (pid)") == f"{user}|t"
    assert primary.sql("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == "t"
    conninfo = replica.sql("SHOW primary_conninfo")
    assert "sslmode=verify-full" in conninfo and "sslrootcert=" in conninfo, conninfo
    machine = primary.machine
    plain = machine.run(["psql", f"host={primary.ip} port={machine.port} dbname=postgres sslmode=disable "
                         f"user={machine.secret['username']}", "-XAtc", "select 1"],
                        {"PATH": machine.path, "PGPASSWORD": machine.secret["password"]})
    assert plain.returncode != 0 and "no encryption" in plain.stderr, plain.stderr
