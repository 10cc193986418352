"""restore.enabled: a new database B restores a dump of database A on first boot.

A is the session's primary; its dumps come from the backup CronJob's container.
B is rendered from the operator's values plus `--set restore.enabled=true
--set restore.claimName=src-backups` (the operator does not pass restore values
yet), and B's pods get A's backup directory as that claim. Every database here
has its own port and credentials Secret.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

import pytest
import yaml

from .harness import EXAMPLE, BackupJob, DatabasePod, Machine, Rendered, find_helm, render_with, wait_for


CLAIM = "src-backups"
RESTORE = ("--set", "restore.enabled=true", "--set", f"restore.claimName={CLAIM}")
ROWS = 500
DIGEST = ("SELECT count(*), md5(string_agg(format('%s|%s|%s', id, label, amount), ',' ORDER BY id))"
          " FROM first_boot_source")
SYSTEM_ID = "SELECT system_identifier FROM pg_control_system()"
MARKER = ".restored-from"


@dataclass
class Source:
    job: BackupJob      # A's backup CronJob container and its backup volume
    dump: str           # the one dump it wrote
    digest: str         # DIGEST on A when the dump was taken
    files: dict[str, str]   # snapshot() right after the dump

    def snapshot(self) -> dict[str, str]:
        """Every file in A's backup volume with the sha256 of its content."""
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.job.backups.iterdir())}


@pytest.fixture(scope="module")
def source(machine, rendered, primary) -> Source:
    """Database A with ROWS rows in first_boot_source, dumped once by the CronJob's command."""
    primary.sql(
        "CREATE TABLE first_boot_source (id serial PRIMARY KEY, label text NOT NULL, amount numeric(10,2));"
        f"INSERT INTO first_boot_source (label, amount) SELECT 'item ' || i, i / 4.0"
        f" FROM generate_series(1, {ROWS}) i")
    digest = primary.sql(DIGEST)
    assert digest.startswith(f"{ROWS}|")
    job = BackupJob(machine, rendered, machine.mkdir(machine.root / "first-boot-source-backups"))
    result = job.script("backup.sh")   # a dump only, as with backup.continuous: false (test_archive.py: the rest)
    assert result.returncode == 0, result.stderr
    [dump] = job.dumps()
    found = Source(job, dump, digest, {})
    found.files = found.snapshot()
    return found


@pytest.fixture(scope="module")
def render_db(tmp_path_factory) -> Callable[..., Rendered]:
    """render_db(name, *helm_args): the example MyDatabase named `name`, rendered with
    the operator's values and helm_args on top."""
    helm = find_helm()
    if helm is None:
        pytest.fail("helm not found: set MYDB_HELM or run hack/build-tools.sh", pytrace=False)
    workdir = tmp_path_factory.mktemp("render-restore")

    def do(name: str, *helm_args: str) -> Rendered:
        database = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
        database["metadata"]["name"] = name
        return render_with(helm, database, workdir, *helm_args)

    return do


def restore_volumes(rendered: Rendered) -> list[str]:
    """The database pods' volumes that are the claim CLAIM (none without restore)."""
    pod = rendered.statefulset()["spec"]["template"]["spec"]
    return [v["name"] for v in pod["volumes"]
            if v.get("persistentVolumeClaim", {}).get("claimName") == CLAIM]


def pod_for(request, machine: Machine, rendered: Rendered, ordinal: int, backups: Path) -> DatabasePod:
    """A pod of `rendered` whose restore volume, if any, is the directory `backups`;
    stopped at teardown."""
    pod = DatabasePod(machine, rendered, ordinal,
                      volume_dirs={name: backups for name in restore_volumes(rendered)})
    request.addfinalizer(pod.stop)
    return pod


def marker_of(pod: DatabasePod) -> list[str]:
    return (pod.pgdata / MARKER).read_text().splitlines()


@pytest.fixture(scope="module")
def db_b(machine) -> Machine:
    return machine.sibling("restored-db")


@pytest.fixture(scope="module")
def rendered_b(render_db) -> Rendered:
    return render_db("restored-db", *RESTORE)


@pytest.fixture(scope="module")
def restored_primary(request, db_b, rendered_b, source) -> DatabasePod:
    """B's ordinal 0, first boot, RESTORE_FROM=latest (the chart's default)."""
    return pod_for(request, db_b, rendered_b, 0, source.job.backups).start()


def test_primary_restores_latest_dump_before_serving(restored_primary, primary, source):
    """B's primary comes up serving A's rows (same digest, the sequence continues
    after them) in a cluster of its own (another system identifier), records the
    dump it restored in PGDATA/.restored-from, started its server on TCP only after
    the restore was done, and left A's backup volume (mounted read-only) as it was."""
    b = restored_primary
    assert b.sql(DIGEST) == source.digest
    assert b.sql("SELECT nextval('first_boot_source_id_seq')") == str(ROWS + 1)
    assert b.sql(SYSTEM_ID) != primary.sql(SYSTEM_ID)
    assert marker_of(b)[0] == source.dump

    log = b.logs()
    assert "restore: done" in log, log
    listening = [i for i, line in enumerate(log.splitlines()) if "listening on IPv4" in line]
    done = next(i for i, line in enumerate(log.splitlines()) if "restore: done" in line)
    assert listening and min(listening) > done, log
    assert source.snapshot() == source.files


def test_replica_clones_the_restored_primary(request, db_b, rendered_b, restored_primary, source):
    """B's ordinal 1 gets the same RESTORE_FROM but ignores it: it clones B's primary
    (same system identifier, in recovery) and so has A's rows, and restores nothing."""
    replica = pod_for(request, db_b, rendered_b, 1, source.job.backups).start()
    assert replica.sql("SELECT pg_is_in_recovery()") == "t"
    assert replica.sql(SYSTEM_ID) == restored_primary.sql(SYSTEM_ID)
    wait_for("A's rows on B's replica", lambda: replica.sql(DIGEST) == source.digest, timeout=20)
    assert "restore:" not in replica.logs() and "cloned" in replica.logs(), replica.logs()
    replica.stop()


def test_restarted_primary_does_not_restore_again(restored_primary, primary, source):
    """After a row is written on B and A has a newer dump (so "latest" now means
    another file), restarting B's primary restores nothing: the row written on B
    survives, B still holds the first dump's data, and the marker is unchanged."""
    b = restored_primary
    b.sql("CREATE TABLE written_on_b (note text); INSERT INTO written_on_b VALUES ('mine')")
    primary.sql("INSERT INTO first_boot_source (label, amount) VALUES ('only in A', 0)")
    # Dump names are stamped to the second; the first dump may be from this very second.
    wait_for("a second dump of A", lambda: source.job.run().returncode == 0 and len(source.job.dumps()) == 2,
             timeout=5, interval=0.5)
    before = marker_of(b)

    offset = len(b.logs())
    b.stop()
    b.start()
    log = b.logs()[offset:]
    assert "not restoring again" in log and "restore:" not in log, log
    assert b.sql("SELECT note FROM written_on_b") == "mine"
    assert b.sql(DIGEST) == source.digest
    assert marker_of(b) == before


def test_existing_database_is_never_overwritten(request, machine, render_db, source):
    """A database that first booted without restore and is later rendered with it
    keeps its own data: the restore is ignored (and said so), nothing of A appears."""
    db_c = machine.sibling("late-restore")
    plain = pod_for(request, db_c, render_db("late-restore"), 0, source.job.backups)
    assert "RESTORE_FROM" not in plain.init_containers[0].env
    plain.start()
    plain.sql("CREATE TABLE own_data (id int); INSERT INTO own_data VALUES (7)")
    plain.stop()

    later = pod_for(request, db_c, render_db("late-restore", *RESTORE), 0, source.job.backups)
    assert later.init_containers[0].env["RESTORE_FROM"] == "latest"
    assert "RESTORE_FROM" not in later.env   # the server's container: the first boot is done by then
    later.start()
    assert "RESTORE_FROM=latest ignored" in later.logs(), later.logs()
    assert later.sql("SELECT id FROM own_data") == "7"
    assert later.sql("SELECT to_regclass('first_boot_source') IS NULL") == "t"
    assert not (later.pgdata / MARKER).exists()


def test_failed_restore_crash_loops_then_retries(request, machine, render_db, source):
    """With a corrupt newest dump (checksum mismatch), B's primary exits non-zero
    without ever passing its startup probe, leaves no process and nothing in its data
    volume that looks like a cluster; the next start tries again (and fails the same
    way, not "refusing" a half-made directory). Rendered with the good dump named
    in restore.backup, the next start restores it and serves."""
    db_d = machine.sibling("retry-db")
    backups = db_d.mkdir(db_d.root / "mixed-backups")
    for f in (source.dump, f"{source.dump}.sha256"):
        shutil.copy(source.job.backups / f, backups / f)
    stamp = datetime.strptime(source.dump, "%Y%m%dT%H%M%SZ.dump") + timedelta(hours=1)
    corrupt = stamp.strftime("%Y%m%dT%H%M%SZ.dump")
    data = bytearray((backups / source.dump).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (backups / corrupt).write_bytes(bytes(data))
    shutil.copy(backups / f"{source.dump}.sha256", backups / f"{corrupt}.sha256")

    latest = render_db("retry-db", *RESTORE)
    for attempt in (1, 2):
        pod = pod_for(request, db_d, latest, 0, backups)
        code, served = pod.start_expecting_exit()
        assert code != 0 and not served, (attempt, pod.logs())
        log = pod.logs()
        assert log.count("checksum mismatch") == attempt, log
        assert "refusing" not in log, log
        assert not pod.leftovers(), pod.leftovers()
        assert list(pod.pgdata.parent.rglob("PG_VERSION")) == [], attempt
        assert not (pod.pgdata / MARKER).exists()

    fixed = render_db("retry-db", *RESTORE, "--set", f"restore.backup={source.dump}")
    pod = pod_for(request, db_d, fixed, 0, backups).start()
    assert pod.sql(DIGEST) == source.digest
    assert marker_of(pod)[0] == source.dump
