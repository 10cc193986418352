"""Retention: prune.sh as the CronJob runs it, on real dumps of the primary."""

from __future__ import annotations

import os
import shutil
import time
from datetime import datetime, timedelta, timezone

import pytest

UNITS = {"h": 3600, "d": 86400, "w": 604800}


def when(name: str) -> datetime:
    return datetime.strptime(name, "%Y%m%dT%H%M%SZ.dump").replace(tzinfo=timezone.utc)


def aged_copy(job, source: str, taken: datetime) -> str:
    """The dump `source` as if backup.sh had written it at `taken`: named by that
    time, with its own checksum line, and file times set to it (os.utime)."""
    name = taken.strftime("%Y%m%dT%H%M%SZ.dump")
    shutil.copyfile(job.backups / source, job.backups / name)
    digest = (job.backups / f"{source}.sha256").read_text().split()[0]
    (job.backups / f"{name}.sha256").write_text(f"{digest}  {name}\n")
    for path in (job.backups / name, job.backups / f"{name}.sha256"):
        shutil.chown(path, job.machine.user or os.getuid(), job.machine.user or os.getgid())
        os.utime(path, (taken.timestamp(), taken.timestamp()))
    return name


def next_second() -> None:
    """backup.sh names dumps by the second; wait for a new one."""
    time.sleep(1.05 - time.time() % 1)


def assert_intact(job, names) -> None:
    for name in names:
        assert (job.backups / f"{name}.sha256").exists(), name
        checked = job.machine.run(["sha256sum", "-c", f"{name}.sha256"], job.env, cwd=job.backups)
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("retention", ["7d", "12h", "4w"])
def test_cronjob_prunes_dumps_older_than_the_retention(primary, render_database, backup_job, retention):
    """With spec.backup.retention rendered as BACKUP_RETENTION (7d, 12h, 4w), the
    CronJob's command (backup then prune) deletes the dumps, and their checksums,
    older than the retention and keeps the younger ones intact."""
    job = backup_job(render_database(retention))
    assert job.env["BACKUP_RETENTION"] == retention
    assert job.run().returncode == 0
    [first] = job.dumps()
    span = timedelta(seconds=int(retention[:-1]) * UNITS[retention[-1]])
    now = when(first)
    old = [aged_copy(job, first, now - age) for age in (3 * span, span + timedelta(minutes=2))]
    young = [aged_copy(job, first, now - age) for age in (span - timedelta(minutes=2), span / 2)]

    next_second()
    result = job.run()
    assert result.returncode == 0, result.stderr
    [second] = set(job.dumps()) - {first, *old, *young}
    assert job.dumps() == sorted([*young, first, second])
    assert not any((job.backups / f"{n}.sha256").exists() for n in old)
    for name in old:
        assert f"prune: removed {name}" in result.stdout
    assert_intact(job, job.dumps())


def test_newest_dump_is_kept_however_old(primary, backup_job):
    """When every dump is older than the retention (backups failing for weeks),
    prune.sh deletes all but the newest complete dump, which stays intact and
    restorable; a newer partial file of a failed run does not count as newest.
    Checked with the script's NOW override and with the real clock."""
    job = backup_job()
    assert job.run().returncode == 0
    [real] = job.dumps()
    start = when(real)
    for days in (30, 20, 10):
        aged_copy(job, real, start - timedelta(days=days))
    # NOW: 8 days after the real dump, so every dump is older than the rendered 7d.
    result = job.script("prune.sh", NOW=str(int((start + timedelta(days=8)).timestamp())))
    assert result.returncode == 0, result.stderr
    assert job.files() == [real, f"{real}.sha256"]
    assert_intact(job, [real])
    listing = job.machine.run(["pg_restore", "--list", str(job.backups / real)], job.env)
    assert listing.returncode == 0, listing.stderr

    # Real clock: only dumps from 10 to 30 days back, and a newer failed run.
    other = backup_job()
    shutil.copyfile(job.backups / real, other.backups / real)
    shutil.copyfile(job.backups / f"{real}.sha256", other.backups / f"{real}.sha256")
    stale = [aged_copy(other, real, start - timedelta(days=d)) for d in (30, 20, 10)]
    for path in (other.backups / real, other.backups / f"{real}.sha256"):
        path.unlink()
    failed = (start - timedelta(days=1)).strftime(".%Y%m%dT%H%M%SZ.dump.partial")
    (other.backups / failed).write_bytes(b"half a dump")
    result = other.script("prune.sh")
    assert result.returncode == 0, result.stderr
    assert other.dumps() == [stale[-1]]
    assert_intact(other, [stale[-1]])
