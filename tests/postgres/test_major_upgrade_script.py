"""major-upgrade.sh's steps before and after pg_upgrade, on the machine's PostgreSQL (one major here, so the data
directory says an older one): what a killed Job left is finished or undone, and a volume without room for the new
cluster fails before anything is made. pg_upgrade from 15 to 17 runs in tests/e2e/test_major_upgrade.py.

The machine's real pg_upgrade also runs here, from its major to the same major (pg_upgrade allows it), to fail
late in --link mode, after it renamed the old pg_control: the script is told of a later major once (its own
`postgres -V`), and one of pg_upgrade's own steps after the rename is made to fail (`pg_resetwal -o`, before the
new server starts on the linked files; `pg_ctl stop` of that server, after it did)."""

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


# --- a real pg_upgrade --link that fails after renaming pg_control ------------------------------------------------

SHIMS = """#!/bin/sh
# {name}: the machine's, but for the one call the test makes fail.
real={real}
{body}
exec "$real" "$@"
"""
# The script's own `postgres -V`, its first call, hears of a later major; pg_upgrade's checks get the real one.
TOLD_LATER = """if [ "$1" = -V ] && [ ! -e {told} ]; then : > {told}; echo "postgres (PostgreSQL) 16.0"; exit 0; fi"""
# After linking, pg_upgrade sets the new cluster's next OID (pg_resetwal -o), then starts the new server once more.
FAIL_NEXT_OID = """case " $* " in *" -o "*) echo "pg_resetwal: no room left (made to fail)" >&2; exit 1 ;; esac"""
FAIL_LAST_STOP = """if [ -e {control_old} ]; then
  case " $* " in *" stop "* | *" stop") "$real" "$@"; echo "pg_ctl: made to fail" >&2; exit 1 ;; esac
fi"""


@pytest.fixture
def linked_volume(machine: Machine, tmp_path_factory) -> Path:
    """A volume with a stopped cluster of the machine's major at volume/pgdata, made by the credentials'
    superuser (pg_upgrade wants the same install user in both clusters), holding 100 rows."""
    root = machine.mkdir(machine.root / f"linked-{tmp_path_factory.mktemp('v').name}")
    pgdata, env = root / "pgdata", {"PATH": machine.path}
    result = machine.run([str(machine.pg_bin / "initdb"), "-D", str(pgdata), "-U", machine.secret["username"],
                          "--encoding=UTF8"], env)  # as the chart's first boot makes it
    assert result.returncode == 0, result.stderr
    started = start_server(machine, root)
    assert started.returncode == 0, started.stdout + started.stderr
    made = local_sql(machine, root, "create table kept as select g as id from generate_series(1, 100) g")
    assert machine.run(["pg_ctl", "-D", str(pgdata), "-m", "fast", "-w", "stop"], env).returncode == 0
    assert made.returncode == 0, made.stderr
    return root


def start_server(machine: Machine, volume: Path) -> subprocess.CompletedProcess:
    """The machine's server on volume/pgdata, on a socket in volume/sockets only (its log beside)."""
    sockets = machine.mkdir(volume / "sockets")
    options = f"-c listen_addresses='' -k {sockets} -p {machine.port}"
    return machine.run(["pg_ctl", "-D", str(volume / "pgdata"), "-o", options, "-l", str(sockets / "server.log"),
                        "-w", "start"], {"PATH": machine.path})


def local_sql(machine: Machine, volume: Path, sql: str) -> subprocess.CompletedProcess:
    return machine.run(["psql", "-XAtq", "-h", str(volume / "sockets"), "-p", str(machine.port), "-U",
                        machine.secret["username"], "-d", "postgres", "-c", sql], {"PATH": machine.path})


def upgrade_for_real(machine: Machine, volume: Path, fail: str) -> subprocess.CompletedProcess:
    """major-upgrade.sh with the machine's programs as both majors' and FAIL (FAIL_NEXT_OID or FAIL_LAST_STOP)
    in pg_upgrade's late steps."""
    major = major_of(machine)
    old_bin = machine.mkdir(volume / "old-root" / "usr" / "lib" / "postgresql" / major) / "bin"
    old_bin.symlink_to(machine.pg_bin)
    shims = machine.mkdir(volume / "new-bin")
    bodies = {"postgres": TOLD_LATER.format(told=volume / "told"),
              "pg_resetwal": FAIL_NEXT_OID if fail == FAIL_NEXT_OID else "",
              "pg_ctl": FAIL_LAST_STOP.format(control_old=volume / "pgdata" / "global" / "pg_control.old")
              if fail == FAIL_LAST_STOP else ""}
    for program in machine.pg_bin.iterdir():
        shim = shims / program.name
        if program.name in bodies:
            shim.write_text(SHIMS.format(name=program.name, real=program, body=bodies[program.name]))
            shim.chmod(0o755)
        else:
            shim.symlink_to(program)
    credentials = machine.mkdir(volume / "credentials")
    for key in ("username", "password"):
        (credentials / key).write_text(machine.secret[key])
    return machine.run(["/bin/sh", str(SCRIPT)], {
        "PATH": f"{shims}:{machine.path}", "PGDATA": str(volume / "pgdata"), "OLD_ROOT": str(volume / "old-root"),
        "CREDENTIALS_DIR": str(credentials)}, timeout=180)


def test_a_link_that_fails_before_the_new_server_started_leaves_the_old_cluster_serving_its_rows(
        machine, linked_volume):
    """pg_upgrade renamed pg_control and linked every file, then failed: the old cluster is as it was, so
    failed() puts pg_control back, and the old major's server starts on it with every row."""
    pgdata = linked_volume / "pgdata"
    result = upgrade_for_real(machine, linked_volume, FAIL_NEXT_OID)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert 'Adding ".old" suffix to old global/pg_control' in result.stdout, said  # the rename did happen
    assert "Linking user relation files" in result.stdout, said
    assert (pgdata / "global" / "pg_control").exists() and not (pgdata / "global" / "pg_control.old").exists()
    assert not (linked_volume / "pgdata.upgrade").exists()
    started = start_server(machine, linked_volume)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        counted = local_sql(machine, linked_volume, "select count(*) from kept")
        assert counted.stdout.strip() == "100", counted.stdout + counted.stderr
    finally:
        machine.run(["pg_ctl", "-D", str(pgdata), "-m", "immediate", "-w", "stop"], {"PATH": machine.path})
    # The words name pg_upgrade's step and what its program said, and that pg_control is back.
    assert (f"major-upgrade: pg_upgrade --link from PostgreSQL {major_of(machine)} to 16 failed: Setting next OID "
            "for new cluster: pg_resetwal: no room left (made to fail); the data is untouched (its pg_control, "
            "renamed for linking, is back)") in result.stderr, said


def test_a_link_that_fails_after_the_new_server_started_keeps_everything_and_says_the_old_data_is_untrusted(
        machine, linked_volume):
    """The new server ran on the files both clusters share before pg_upgrade failed: the old cluster can no
    longer be trusted (pg_upgrade's documentation), so nothing is put back or removed, and the words say so."""
    pgdata, new = linked_volume / "pgdata", linked_volume / "pgdata.upgrade"
    result = upgrade_for_real(machine, linked_volume, FAIL_LAST_STOP)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "the old data can no longer be trusted and nothing was removed" in result.stderr, said
    assert f"kept: {pgdata} with global/pg_control.old, and {new}" in result.stderr, said
    assert "the data is untouched" not in said
    assert (pgdata / "global" / "pg_control.old").exists() and not (pgdata / "global" / "pg_control").exists()
    assert (new / "PG_VERSION").exists()  # the new cluster, kept
    # A retried Job says the same and changes nothing.
    again = upgrade_for_real_again(machine, linked_volume)
    assert again.returncode == 1 and "can no longer be trusted" in again.stderr, again.stdout + again.stderr
    assert (pgdata / "global" / "pg_control.old").exists() and (new / "PG_VERSION").exists()


def upgrade_for_real_again(machine: Machine, volume: Path) -> subprocess.CompletedProcess:
    """The script once more on what the last run left (the shims and credentials in place)."""
    (volume / "told").unlink(missing_ok=True)
    return machine.run(["/bin/sh", str(SCRIPT)], {
        "PATH": f"{volume / 'new-bin'}:{machine.path}", "PGDATA": str(volume / "pgdata"),
        "OLD_ROOT": str(volume / "old-root"), "CREDENTIALS_DIR": str(volume / "credentials")}, timeout=180)


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
