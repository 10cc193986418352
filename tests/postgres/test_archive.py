"""The continuous archive and recovery to a moment, on the machine's PostgreSQL.

The source database is the seed rendered as the operator renders it (the archive
is on by default with spec.backup): its ordinal 0, the archive pod's
wal-archive.sh streaming into a backup volume, and the backup CronJob's command
(base-backup.sh, backup.sh, prune.sh). A new database's ordinal 0, rendered with
spec.restore, recovers from that volume on its first boot (primary-init.sh,
recover.sh, wal-restore.sh).
"""

from __future__ import annotations

import copy
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from mydb_operator.instances.probe import FACTS

from .harness import EXAMPLE, ArchivePod, BackupJob, DatabasePod, Machine, Rendered, find_helm, render, wait_for

SOURCE = "production-db"   # the seed's name: the restoring databases name it in spec.restore
ROWS = "SELECT coalesce(string_agg(DISTINCT kind, ',' ORDER BY kind), '') || ':' || count(*) FROM t"


@dataclass
class Source:
    machine: Machine
    pod: DatabasePod
    archive: ArchivePod
    job: BackupJob

    @property
    def backups(self) -> Path:
        return self.job.backups

    def archived(self) -> None:
        """Wait until the archive has flushed everything the primary wrote so far."""
        lsn = self.pod.sql("SELECT pg_current_wal_lsn()")
        wait_for(f"the archive to flush {lsn}", lambda: self.pod.sql(
            "SELECT coalesce(bool_or(flush_lsn >= '" + lsn + "'), false) FROM pg_stat_replication"
            " WHERE application_name = 'mydb-archive'") == "t")

    def base_backups(self) -> list[str]:
        return sorted(p.name for p in (self.backups / "base").iterdir() if not p.name.startswith("."))


@pytest.fixture
def source(request, machine, rendered) -> Source:
    """A one-pod source database with its archive streaming and one scheduled run done."""
    own = machine.sibling(f"archived-{secrets.token_hex(4)}")
    pod = DatabasePod(own, rendered, 0)
    request.addfinalizer(pod.stop)
    pod.start()
    backups = own.mkdir(own.root / "backups")
    archive = ArchivePod(own, rendered, backups)
    request.addfinalizer(archive.stop)
    archive.start()
    job = BackupJob(own, rendered, backups)
    result = job.run()
    assert result.returncode == 0, result.stdout + result.stderr
    pod.sql("CREATE TABLE t (id serial PRIMARY KEY, kind text NOT NULL)")
    return Source(own, pod, archive, job)


def restoring(request, machine: Machine, name: str, source: Source, **restore: str) -> DatabasePod:
    """Ordinal 0 of a new database with spec.restore from the source (rendered by the operator),
    the source's backup volume as its restore volume; not started."""
    helm = find_helm()
    assert helm, "helm not found"
    database = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    database["metadata"]["name"] = name
    database["spec"]["restore"] = {"fromDatabase": SOURCE, **restore}
    rendered: Rendered = render(helm, database, machine.root)
    pod = DatabasePod(machine.sibling(name), rendered, 0, volume_dirs={"restore-source": source.backups})
    request.addfinalizer(pod.stop)
    return pod


def utc_now_of(pod: DatabasePod) -> str:
    """The server's clock, as RFC 3339 in UTC (what a user copies from a log line)."""
    return pod.sql("SELECT to_char(clock_timestamp() AT TIME ZONE 'utc', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")


def test_a_new_database_recovers_to_a_moment_between_the_writes_and_a_drop(request, machine, source):
    """Rows written before the moment are there, rows written after it are not, the table dropped by mistake
    after it is back; the copy is promoted onto a timeline of its own, and logs in with its own passwords."""
    source.pod.sql("INSERT INTO t (kind) SELECT 'before' FROM generate_series(1, 100)")
    time.sleep(0.2)   # commit timestamps are the server's clock: keep the moment clear of both sides
    moment = utc_now_of(source.pod)
    time.sleep(0.2)
    source.pod.sql("INSERT INTO t (kind) SELECT 'after' FROM generate_series(1, 10)")
    source.pod.sql("DROP TABLE t")
    source.archived()

    copy_pod = restoring(request, machine, "to-a-moment", source, pointInTime=moment)
    copy_pod.start(timeout=120)
    assert copy_pod.sql(ROWS) == "before:100"
    assert copy_pod.sql("SELECT pg_is_in_recovery()") == "f"
    assert int(copy_pod.sql("SELECT timeline_id FROM pg_control_checkpoint()")) > 1
    assert (copy_pod.pgdata / ".restored-from").read_text().split() == ["archive", moment]
    assert "recover: base backup" in copy_pod.logs(), copy_pod.logs()


def test_the_end_of_the_archive_has_the_last_commit_of_a_lost_source(request, machine, source):
    """The source is lost (crash, archive gone) right after a commit the archive flushed: a restore with no moment
    recovers to the archive's end, the .partial segment included, and has that commit."""
    source.pod.sql("INSERT INTO t (kind) SELECT 'kept' FROM generate_series(1, 5)")
    source.pod.sql("INSERT INTO t (kind) VALUES ('last')")
    source.archived()
    source.pod.stop("immediate")
    source.archive.stop()
    assert any(p.name.endswith(".partial") for p in source.archive.wal.iterdir())

    copy_pod = restoring(request, machine, "to-the-end", source)
    copy_pod.start(timeout=120)
    assert copy_pod.sql(ROWS) == "kept,last:6"


def test_a_moment_before_the_first_base_backup_is_refused_with_the_window(request, machine, source):
    """The first boot fails, says which moments can be recovered, and leaves the data directory empty."""
    copy_pod = restoring(request, machine, "too-early", source, pointInTime="2001-01-01T00:00:00Z")
    code, served = copy_pod.start_expecting_exit()
    assert code == 1 and not served
    assert "pointInTime 2001-01-01T00:00:00Z is before the first recoverable point" in copy_pod.logs()
    assert "the archive recovers from" in copy_pod.logs(), copy_pod.logs()
    assert not copy_pod.pgdata.exists() or not any(copy_pod.pgdata.iterdir())


def test_retention_keeps_the_newest_base_backup_and_exactly_the_wal_it_needs(request, machine, source):
    """Of two base backups, the newest one older than the retention stays (the window's first moments recover
    from it); an older one goes, and every segment before the kept one's first; a recovery from what is left
    still reaches the archive's end."""
    first = source.base_backups()[0]
    source.pod.sql("INSERT INTO t (kind) SELECT 'old' FROM generate_series(1, 10)")
    for _ in range(2):
        source.pod.sql("SELECT pg_switch_wal()")
        source.pod.sql("INSERT INTO t (kind) VALUES ('filler')")
    time.sleep(1.1)   # base backups are named by the second
    result = source.job.script("base-backup.sh")
    assert result.returncode == 0, result.stderr
    [_, second] = source.base_backups()
    source.pod.sql("INSERT INTO t (kind) VALUES ('new')")
    source.archived()
    info = dict(line.split("=", 1) for line in (source.backups / "base" / second / "info").read_text().split())
    older = [p.name for p in source.archive.wal.iterdir() if p.name[8:24] < info["start_wal"][8:]]
    assert older, "no segment before the second base backup: nothing for retention to remove"

    first_epoch = int(datetime.strptime(first, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp())
    second_epoch = int(datetime.strptime(second, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp())
    # The window's start lies between the two: the first is the newest before it, and a recovery to the
    # window's first moments starts from it: it stays.
    result = source.job.script("prune.sh", BACKUP_RETENTION="1h", NOW=str(first_epoch + 3600 + 1))
    assert result.returncode == 0, result.stderr
    assert source.base_backups() == [first, second]
    # Both older than the window: the newer of them covers its start, the first goes.
    result = source.job.script("prune.sh", BACKUP_RETENTION="1h", NOW=str(second_epoch + 3600 + 1))
    assert result.returncode == 0, result.stderr
    assert source.base_backups() == [second]
    segments = sorted(p.name[8:24] for p in source.archive.wal.iterdir() if len(p.name.split(".")[0]) == 24)
    assert segments[0] == info["start_wal"][8:], (segments, info)

    copy_pod = restoring(request, machine, "after-prune", source)
    copy_pod.start(timeout=120)
    assert copy_pod.sql(ROWS) == "filler,new,old:13"


def test_a_verification_recovers_the_newest_base_backup_and_fails_on_a_damaged_one(machine, source):
    """verify.sh (the verify-backup Job's command): the base backup matches its manifest, recovers with the
    archive and answers; with a byte of one of its files changed, it fails and says which backup."""
    source.pod.sql("INSERT INTO t (kind) VALUES ('verified')")
    source.archived()
    scratch = source.machine.mkdir(source.machine.root / "verify")
    result = source.job.script("verify.sh", VERIFY_DIR=str(scratch))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verify: ok: base backup" in result.stdout and "every checksum right)" in result.stdout, result.stdout
    assert list(scratch.iterdir()) == []   # the copy is gone

    [backup] = source.base_backups()
    control = source.backups / "base" / backup / "data" / "global" / "pg_control"
    damaged = bytearray(control.read_bytes())
    damaged[100] ^= 0xFF
    control.write_bytes(bytes(damaged))
    result = source.job.script("verify.sh", VERIFY_DIR=str(scratch))
    assert result.returncode == 1
    assert f"verify: failed: base backup {backup} does not match its manifest" in result.stderr, result.stderr


def test_a_page_damaged_on_the_primarys_disk_fails_the_verification_of_the_backup_that_copied_it(source):
    """Data checksums are on (primary-init.sh). A byte of a table's page changed on the primary's disk behind
    PostgreSQL's back: the server refuses to read the page; the next base backup copies it as it is (its
    manifest matches the damage), and the verification of that backup fails naming the relation and block."""
    pod = source.pod
    assert pod.sql("SHOW data_checksums") == "on"
    pod.sql("CREATE TABLE damaged AS SELECT g AS id, repeat('x', 200) AS filler FROM generate_series(1, 500) g")
    pod.sql("CHECKPOINT")
    relation_file = pod.pgdata / pod.sql("SELECT pg_relation_filepath('damaged')")
    pod.stop(mode="fast")
    page = bytearray(relation_file.read_bytes())
    page[4000] ^= 0xFF  # inside block 0's tuples
    relation_file.write_bytes(bytes(page))
    pod.start(init=False)
    refused = source.machine.psql(pod.ip, "SELECT count(*) FROM damaged")
    assert refused.returncode != 0 and "invalid page in block 0" in refused.stderr, refused.stderr
    # The operator's probe counts it (status.instances[].checksumFailures, a Warning on each rise).
    facts = FACTS.replace("$1", "'mydb_archive'").replace("$2", "'mydb_replica_'")
    assert int(pod.sql(f"SELECT checksum_failures FROM ({facts}) facts")) >= 1
    source.archived()

    time.sleep(1.1)   # base backups are named by the second
    taken = source.job.script("base-backup.sh")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    newest = source.base_backups()[-1]
    scratch = source.machine.mkdir(source.machine.root / "verify-damaged")
    result = source.job.script("verify.sh", VERIFY_DIR=str(scratch))
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f"verify: failed: base backup {newest} holds 1 damaged pages (data checksums wrong): relation damaged "
            "(database postgres) block 0") in result.stderr, result.stderr
    assert list(scratch.iterdir()) == []


def test_a_moment_after_the_end_of_the_archive_is_refused_with_the_window(request, machine, source):
    """Recovery replays everything the archive has without reaching the moment: the first boot fails, says the
    moment is after the archive's end and what the window is, and leaves the data directory empty."""
    source.pod.sql("INSERT INTO t (kind) VALUES ('last')")
    source.archived()
    copy_pod = restoring(request, machine, "too-late", source, pointInTime="2999-01-01T00:00:00Z")
    code, served = copy_pod.start_expecting_exit()
    assert code == 1 and not served
    assert "pointInTime 2999-01-01T00:00:00Z is after the end of the archive" in copy_pod.logs(), copy_pod.logs()
    assert not copy_pod.pgdata.exists() or not any(copy_pod.pgdata.iterdir())


def own_tree(machine: Machine, path: Path) -> None:
    """Give what the test made under PATH to the machine's PostgreSQL user, as a volume's files would be."""
    if machine.user:
        for item in [path, *path.rglob("*")]:
            shutil.chown(item, machine.user, machine.user)


def test_an_older_majors_archive_is_moved_aside_by_the_next_base_backup(rendered, source):
    """A backup volume whose base backups are PostgreSQL 14's (read from the newest one's PG_VERSION, as on a
    volume from before PG_MAJOR) gets a 15 base backup: the 14 base/ and wal/ go to postgresql-14/, labelled,
    and the volume is 15's from then on."""
    volume = source.machine.mkdir(source.machine.root / "upgraded")
    old_backup = volume / "base" / "20261101T020000Z" / "data"
    old_backup.mkdir(parents=True)
    (old_backup / "PG_VERSION").write_text("14\n")
    (volume / "wal").mkdir()
    (volume / "wal" / "000000010000000000000007").write_bytes(b"14's WAL")
    own_tree(source.machine, volume)

    result = BackupJob(source.machine, rendered, volume).script("base-backup.sh")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PostgreSQL 14's base backups and WAL are kept in" in result.stdout, result.stdout
    kept = volume / "postgresql-14"
    assert (kept / "PG_MAJOR").read_text().strip() == "14"
    assert (kept / "base" / "20261101T020000Z" / "data" / "PG_VERSION").exists()
    assert (kept / "wal" / "000000010000000000000007").read_bytes() == b"14's WAL"
    assert (volume / "PG_MAJOR").read_text().strip() == "15"
    [new] = [p for p in (volume / "base").iterdir() if not p.name.startswith(".")]
    assert (new / "data" / "PG_VERSION").read_text().strip() == "15"


def test_a_database_of_the_old_major_recovers_from_the_archive_an_upgrade_kept(request, machine, source):
    """The source was upgraded to 16 in place: its 15 archive is under postgresql-15/ and the volume is 16's. A
    new 15 database restoring from it recovers from postgresql-15/, to its end; with that folder gone, it is
    refused with both majors named, and its data directory stays empty."""
    source.pod.sql("INSERT INTO t (kind) SELECT 'fifteen' FROM generate_series(1, 7)")
    source.archived()
    source.pod.stop("fast")
    source.archive.stop()
    kept = source.backups / "postgresql-15"
    kept.mkdir()
    for part in ("base", "wal", "PG_MAJOR"):
        (source.backups / part).rename(kept / part)
    (source.backups / "PG_MAJOR").write_text("16\n")
    own_tree(source.machine, source.backups)

    copy_pod = restoring(request, machine, "old-major", source)
    copy_pod.start(timeout=120)
    assert copy_pod.sql(ROWS) == "fifteen:7"

    kept.rename(source.backups / "elsewhere")
    refused = restoring(request, machine, "no-old-major", source, pointInTime=utc_now_of(copy_pod))
    code, served = refused.start_expecting_exit()
    assert code == 1 and not served
    assert "the archive in" in refused.logs() and "is PostgreSQL 16's and this is PostgreSQL 15" in refused.logs()
    assert not refused.pgdata.exists() or not any(refused.pgdata.iterdir())


def test_the_archive_stops_at_once_on_the_pods_sigterm_with_nothing_left_running(source):
    """Kubernetes stops a pod with SIGTERM to its container's PID 1, here the script's shell, which ignores a
    signal it has no trap for (the pod then waited out its 30 s grace period on every deletion and roll). Only
    the shell gets it, as there: the script stops its pg_receivewal and ends, and nothing of it stays behind.
    What was streamed before stays in the archive."""
    source.pod.sql("INSERT INTO t (kind) VALUES ('before the stop')")
    source.archived()
    shell = source.archive.proc
    os.kill(shell.pid, signal.SIGTERM)
    assert shell.wait(timeout=5) == 0, source.archive.logs()
    with pytest.raises(ProcessLookupError):  # the process group: the script and its pg_receivewal
        os.killpg(shell.pid, 0)
    assert any((source.backups / "wal").iterdir())
