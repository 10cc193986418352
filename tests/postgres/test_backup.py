"""The backup CronJob's command (backup.sh && prune.sh) against a real primary."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest

from .harness import STAMP_RE, free_port, wait_for


def stamp(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ")


def verify(job, name: str) -> subprocess.CompletedProcess:
    """sha256sum -c of the dump's checksum file, in the backup directory."""
    return job.machine.run(["sha256sum", "-c", f"{name}.sha256"], job.env, cwd=job.backups)


def test_cronjob_writes_a_verified_dump(primary, backup_job):
    """The CronJob's command with its env writes one dump named by its UTC time,
    with a checksum file that `sha256sum -c` accepts, readable by `pg_restore --list`
    (it holds the primary's tables), and leaves no temporary file behind."""
    primary.sql("CREATE TABLE backup_check (id int PRIMARY KEY, note text);"
                "INSERT INTO backup_check SELECT i, md5(i::text) FROM generate_series(1, 120) i")
    job = backup_job()
    before = datetime.now(timezone.utc).replace(microsecond=0)
    result = job.run()
    after = datetime.now(timezone.utc)
    assert result.returncode == 0, result.stderr

    [name] = job.dumps()
    assert job.files() == [name, f"{name}.sha256"]      # nothing hidden, nothing partial
    assert len(job.base_backups()) == 1                 # the continuous archive's starting point, first
    assert STAMP_RE.match(name)
    taken = datetime.strptime(name, "%Y%m%dT%H%M%SZ.dump").replace(tzinfo=timezone.utc)
    assert before <= taken <= after, (before, taken, after)

    checked = verify(job, name)
    assert checked.returncode == 0 and f"{name}: OK" in checked.stdout, checked.stdout + checked.stderr
    listing = job.machine.run(["pg_restore", "--list", str(job.backups / name)], job.env)
    assert listing.returncode == 0, listing.stderr
    assert "TABLE DATA public backup_check" in listing.stdout


@pytest.mark.parametrize("failure", ["unreachable", "wrong-password"])
def test_failed_backup_exits_nonzero_and_writes_nothing(primary, backup_job, failure):
    """When the server cannot be reached or refuses the password, the CronJob's
    command exits non-zero, leaves no dump or partial file, and does not prune
    (an old dump outside the retention survives)."""
    job = backup_job()
    old = stamp(datetime.now(timezone.utc) - timedelta(days=60)) + ".dump"
    (job.backups / old).write_bytes(b"old")
    (job.backups / f"{old}.sha256").write_text("0  x\n")
    if failure == "unreachable":
        # How long each script waits for a server that does not answer yet (a pod the NetworkPolicy engine
        # has not admitted): shortened, as nothing will ever answer here.
        change = {"PGPORT": str(free_port(("127.0.0.1",))), "SERVER_WAIT_SECONDS": "3"}
    else:
        wrong = job.machine.mkdir(job.home / "wrong-credentials")
        for key, value in {**job.machine.secret, "password": "not-the-password"}.items():
            (wrong / key).write_text(value)
        change = {"CREDENTIALS_DIR": str(wrong)}
    result = job.run(**change)
    assert result.returncode != 0
    expected = "Connection refused" if failure == "unreachable" else "password authentication failed"
    assert expected in result.stderr, result.stderr
    assert job.files() == [old, f"{old}.sha256"]
    if failure == "unreachable":   # the base backup failed first: not even an empty base/ is left
        assert not (job.backups / "base").exists()


def test_a_checksum_that_fails_fails_the_backup_and_publishes_nothing(primary, backup_job):
    """sha256sum failing (an I/O error on the volume) must not publish the dump with an empty checksum,
    which a restore of `latest` would pick and then refuse."""
    job = backup_job()
    broken = job.machine.mkdir(job.home / "broken-bin")
    (broken / "sha256sum").write_text("#!/bin/sh\necho 'sha256sum: read error' >&2\nexit 1\n")
    (broken / "sha256sum").chmod(0o755)
    result = job.run(PATH=f"{broken}:{job.env['PATH']}")
    assert result.returncode != 0
    assert "sha256sum: read error" in result.stderr, result.stderr
    assert job.files() == []


@contextmanager
def table_locked(primary, table: str):
    """A session holding an ACCESS EXCLUSIVE lock on `table` (a stuck migration, say): pg_dump waits for it."""
    machine = primary.machine
    primary.sql(f"CREATE TABLE {table} (id int)")
    holder = machine.popen(
        ["psql", "-X", "-h", primary.ip, "-p", str(machine.port), "-U", machine.secret["username"],
         "-c", f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60)"],
        {"PATH": machine.path, "PGPASSWORD": machine.secret["password"], "PGAPPNAME": "lock-holder"},
        machine.root / "lock-holder.log")
    try:
        wait_for("the lock to be held", lambda: primary.sql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            f"WHERE c.relname = '{table}' AND l.mode = 'AccessExclusiveLock' AND l.granted") == "1")
        yield
    finally:
        primary.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name IN ('lock-holder', 'pg_dump')")
        holder.wait(timeout=10)


def test_a_table_locked_too_long_fails_the_backup_with_the_reason(primary, backup_job):
    """pg_dump gives up waiting for a lock after LOCK_WAIT_TIMEOUT (600 s in the Job) instead of hanging
    until the Job's deadline: the backup fails, says why, and publishes nothing."""
    job = backup_job()
    with table_locked(primary, "migrating"):
        started = time.monotonic()
        result = job.run(LOCK_WAIT_TIMEOUT="1s")
        took = time.monotonic() - started
    assert result.returncode != 0 and took < 30, (result.returncode, took)
    assert "LOCK TABLE public.migrating" in result.stderr and "timeout" in result.stderr, result.stderr
    assert job.files() == []


def test_dump_killed_midway_is_cleaned_up_by_the_next_run(primary, backup_job):
    """A backup pod killed while pg_dump runs (node lost, OOM) cannot clean up after
    itself; its partial file is never listed as a dump, and the next run removes it
    and writes a complete dump."""
    job = backup_job()
    # A lock that pg_dump waits for, so the job is surely mid-dump when killed.
    with table_locked(primary, "lock_check"):
        proc = job.start()
        try:
            wait_for("pg_dump to wait for the lock", lambda: primary.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_dump' "
                "AND wait_event_type = 'Lock'") == "1")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    leftovers = job.files()
    assert leftovers and all(f.startswith(".") and ".partial" in f for f in leftovers), leftovers
    assert job.dumps() == []

    time.sleep(1)    # a new second, so the next run's name differs from the killed one's
    result = job.run()
    assert result.returncode == 0, result.stderr
    [name] = job.dumps()
    assert job.files() == [name, f"{name}.sha256"]
    assert verify(job, name).returncode == 0
