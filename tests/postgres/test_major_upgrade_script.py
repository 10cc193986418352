"""major-upgrade.sh's steps before and after pg_upgrade, on the machine's PostgreSQL (one major here, so the data
directory says an older one): what a killed Job left is finished or undone, and a volume without room for the new
cluster fails before anything is made. pg_upgrade itself runs in tests/e2e/test_major_upgrade.py (15 to 17)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .harness import REPO, Machine

SCRIPT = REPO / "charts" / "mydatabase" / "scripts" / "major-upgrade.sh"


@pytest.fixture
def volume(machine: Machine, tmp_path_factory) -> Path:
    """A volume holding a stopped cluster of the machine's major at volume/pgdata."""
    root = machine.mkdir(machine.root / f"upgrade-{tmp_path_factory.mktemp('v').name}")
    result = machine.run([str(machine.pg_bin / "initdb"), "-D", str(root / "pgdata"), "-U", "postgres"],
                         {"PATH": machine.path})
    assert result.returncode == 0, result.stderr
    return root


def upgrade(machine: Machine, volume: Path, **env: str) -> subprocess.CompletedProcess:
    old_root = machine.mkdir(volume / "old-root")   # no old programs: every case here stops before needing them
    return machine.run(["/bin/sh", str(SCRIPT)], {"PATH": machine.path, "PGDATA": str(volume / "pgdata"),
                                                  "OLD_ROOT": str(old_root), **env})


def major_of(machine: Machine) -> str:
    return subprocess.run([str(machine.pg_bin / "postgres"), "-V"], capture_output=True, text=True,
                          check=True).stdout.split()[-1].split(".")[0]


def test_a_volume_without_room_for_the_new_cluster_fails_first_and_untouched(machine, volume):
    pgdata = volume / "pgdata"
    (pgdata / "PG_VERSION").write_text("14\n")
    result = upgrade(machine, volume, MIN_FREE_MB="999999999")
    assert result.returncode == 1
    assert "MB free and the upgrade needs 999999999 MB beside the data: grow spec.storage first; the data is " \
           "untouched" in result.stderr, result.stderr
    assert (pgdata / "PG_VERSION").read_text() == "14\n" and not (volume / "pgdata.upgrade").exists()
    # With room, it goes on to the old programs, which are missing here, and says so.
    result = upgrade(machine, volume, MIN_FREE_MB="1")
    assert result.returncode == 1 and "has no PostgreSQL 14 (old-binaries.sh" in result.stderr, result.stderr


def test_an_upgrade_killed_after_pg_upgrade_renamed_pg_control_is_undone(machine, volume):
    pgdata = volume / "pgdata"
    (pgdata / "PG_VERSION").write_text("14\n")
    control = pgdata / "global" / "pg_control"
    control.rename(control.with_suffix(".old"))
    (volume / "pgdata.upgrade").mkdir()   # the half-made new cluster
    result = upgrade(machine, volume, MIN_FREE_MB="999999999")
    assert "an upgrade cut short was undone" in result.stdout, result.stdout + result.stderr
    assert control.exists() and not control.with_suffix(".old").exists()
    assert not (volume / "pgdata.upgrade").exists()


def test_a_swap_killed_half_way_is_finished(machine, volume):
    """The new cluster was complete (its marker written) and the old directory already moved away."""
    pgdata, new = volume / "pgdata", volume / "pgdata.upgrade"
    pgdata.rename(new)
    (new / ".upgraded").write_text("14\n")
    (volume / "pgdata.old").mkdir()
    result = upgrade(machine, volume)
    assert result.returncode == 0, result.stderr
    assert f"is at PostgreSQL {major_of(machine)}" in result.stdout
    assert (pgdata / "PG_VERSION").exists() and not new.exists() and not (volume / "pgdata.old").exists()
    assert not (pgdata / ".upgraded").exists()
