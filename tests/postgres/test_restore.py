"""restore.sh: a dump of the CronJob restored into a fresh database, and its refusals."""

from __future__ import annotations

import shutil

import pytest

from .harness import free_port


DIGEST = ("SELECT count(*), md5(string_agg(format('%s|%s|%s|%s|%s', id, name, amount, created, tags),"
          " ',' ORDER BY id)) FROM restore_source")
TABLES = "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"


@pytest.fixture(scope="module")
def source(primary) -> str:
    """Database A is the one the CronJob dumps: a table of 300 varied rows in it."""
    primary.sql(
        "CREATE TABLE restore_source (id serial PRIMARY KEY, name text NOT NULL, amount numeric(12,2),"
        " created timestamptz, tags text[]);"
        "CREATE INDEX ON restore_source (name);"
        "INSERT INTO restore_source (name, amount, created, tags)"
        " SELECT 'row ' || i || E' \\u00e9''\\\\', i * 1.25, '2024-01-01'::timestamptz + i * interval '1 hour',"
        " ARRAY['t' || (i % 7), NULL] FROM generate_series(1, 300) i")
    digest = primary.sql(DIGEST)
    assert digest.startswith("300|")
    return digest


def test_restore_latest_into_a_fresh_database(primary, backup_job, source):
    """A dump written by the CronJob, restored by restore.sh (RESTORE_FROM=latest,
    the CronJob's env aimed at a new database B), gives B the same 300 rows, its
    index and a sequence that continues after them; restoring again into the
    now non-empty B fails and changes nothing (one transaction)."""
    job = backup_job()
    assert job.run().returncode == 0
    primary.sql("CREATE DATABASE restore_b")

    result = job.script("restore.sh", RESTORE_FROM="latest", PGDATABASE="restore_b")
    assert result.returncode == 0, result.stderr
    assert primary.sql(DIGEST, db="restore_b") == source
    assert primary.sql("SELECT count(*) FROM pg_indexes WHERE tablename = 'restore_source'",
                       db="restore_b") == "2"
    assert primary.sql("SELECT nextval('restore_source_id_seq')", db="restore_b") == "301"

    again = job.script("restore.sh", RESTORE_FROM="latest", PGDATABASE="restore_b")
    assert again.returncode != 0
    assert "already exists" in again.stderr, again.stderr
    assert primary.sql(DIGEST, db="restore_b") == source


def test_restore_refuses_bad_input_and_changes_nothing(primary, backup_job, source):
    """restore.sh exits non-zero, and leaves the target database empty, when the
    dump's checksum does not match, its checksum file or the dump is missing,
    BACKUP_DIR holds no dump, RESTORE_FROM is unset, or the target is unreachable;
    a bare file name is read from BACKUP_DIR."""
    good = backup_job()
    assert good.run().returncode == 0
    [name] = good.dumps()
    primary.sql("CREATE DATABASE restore_c")

    bad = backup_job()
    for f in (name, f"{name}.sha256"):
        shutil.copy(good.backups / f, bad.backups / f)
    data = bytearray((bad.backups / name).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad.backups / name).write_bytes(bytes(data))
    unsummed = backup_job()
    shutil.copy(good.backups / name, unsummed.backups / name)
    empty = backup_job()

    cases = {
        "checksum mismatch": (bad, {"RESTORE_FROM": "latest"}, "checksum mismatch"),
        "no checksum file": (unsummed, {"RESTORE_FROM": str(unsummed.backups / name)}, "does not exist"),
        "no such dump": (good, {"RESTORE_FROM": str(good.backups / "nope.dump")}, "does not exist"),
        "no dump at all": (empty, {"RESTORE_FROM": "latest"}, "no dump in"),
        "RESTORE_FROM unset": (good, {}, "RESTORE_FROM is required"),
        "unreachable": (good, {"RESTORE_FROM": name, "PGPORT": str(free_port(("127.0.0.1",)))},
                        "Connection refused"),
    }
    for case, (job, env, message) in cases.items():
        result = job.script("restore.sh", PGDATABASE="restore_c", **env)
        assert result.returncode != 0, case
        assert message in result.stderr, f"{case}: {result.stderr}"
        assert primary.sql(TABLES, db="restore_c") == "0", case

    # The same dump by its bare name, untampered, restores.
    result = good.script("restore.sh", RESTORE_FROM=name, PGDATABASE="restore_c")
    assert result.returncode == 0, result.stderr
    assert primary.sql(DIGEST, db="restore_c") == source
