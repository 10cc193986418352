"""Data a replica's pod cannot use is kept aside on its volume, never removed, on the machine's real PostgreSQL.

A former primary that pg_rewind cannot take onto the new primary's timeline (the WAL the rewind needs is gone)
may hold the only copy of commits the new primary never received; a replica's data of another major may be the
last copy of the cluster before a major upgrade. entrypoint.sh init moves either aside to a sibling of PGDATA,
diverged-<UTC time>, with mydb-kept.txt saying what it is, then clones the primary afresh, but only when the
volume has room for the clone beside it. The operator's part (the record, pg_promote()) is played by the test,
as in test_failover.py.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import DatabasePod, free_port, wait_for
from .test_failover import SYSTEM_ID, TIMELINE, database, promote, rows, streaming_from, write

LSN = r"[0-9A-F]+/[0-9A-F]+"


def kept_dirs(pod: DatabasePod) -> list[Path]:
    return sorted(pod.pgdata.parent.glob("diverged-*"))


def kept_info(kept: Path) -> dict[str, str]:
    """mydb-kept.txt's key=value lines."""
    return dict(line.split("=", 1) for line in (kept / "mydb-kept.txt").read_text().splitlines())


def start_kept_by_hand(pod: DatabasePod, kept: Path) -> tuple[str, str]:
    """Starts the kept directory as a person would beside the pod's server: read-only (a standby that follows
    nobody), on a unix socket of its own and another port, no TCP: (socket directory, port)."""
    machine = pod.machine
    sockets = machine.mkdir(pod.home / "kept-socket")
    port = free_port(("127.0.0.1",))
    env = {"PATH": machine.path}
    # The commands, as a person runs them in the pod's postgres container (KEPT is the kept directory,
    # /tmp the socket directory there):
    #   rm -f KEPT/postmaster.pid; touch KEPT/standby.signal
    #   pg_ctl -D KEPT -l /tmp/kept.log -w start \
    #     -o "-p 5433 -c listen_addresses='' -c unix_socket_directories=/tmp -c primary_conninfo=''"
    #   psql -h /tmp -p 5433 -U SUPERUSER -d postgres      (the superuser's password: the credentials Secret)
    #   pg_ctl -D KEPT -m fast -w stop
    for argv in (["rm", "-f", str(kept / "postmaster.pid")], ["touch", str(kept / "standby.signal")]):
        assert machine.run(argv, env).returncode == 0
    options = f"-p {port} -c listen_addresses='' -c unix_socket_directories={sockets} -c primary_conninfo=''"
    started = machine.run(["pg_ctl", "-D", str(kept), "-l", str(pod.home / "kept.log"), "-w", "start",
                           "-o", options], env)
    assert started.returncode == 0, started.stdout + started.stderr + (pod.home / "kept.log").read_text()
    return str(sockets), str(port)


def sql_on_kept(pod: DatabasePod, sockets: str, port: str, query: str) -> str:
    machine = pod.machine
    env = {"PATH": machine.path, "PGPASSWORD": machine.secret["password"]}
    result = machine.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-h", sockets, "-p", port,
                          "-U", machine.secret["username"], "-d", "postgres", "-c", query], env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def stop_kept(pod: DatabasePod, kept: Path) -> None:
    if (kept / "postmaster.pid").exists():
        pod.machine.run(["pg_ctl", "-D", str(kept), "-m", "fast", "-w", "stop"], {"PATH": pod.machine.path})


def kept_line(log: str) -> str:
    """The one line the entrypoint prints about where it kept the data."""
    lines = [line for line in log.splitlines() if line.startswith("entrypoint: kept ")]
    assert len(lines) == 1, log
    return lines[0]


def test_a_former_primary_that_cannot_be_rewound_is_kept_aside_with_its_diverged_rows(request, machine, rendered):
    """The replica stops; the primary commits rows the replica never receives, then checkpoints past the fork
    with wal_keep_size 0, so the WAL pg_rewind would read from the last common checkpoint is gone, and crashes.
    The replica is promoted. The former primary's init container then finds pg_rewind failing (follow.sh exit 3):
    its data directory is moved to diverged-<UTC time> beside PGDATA, mydb-kept.txt says why, where it forked
    and how large it is, one line of the log says where it went, and PGDATA becomes a fresh clone of the new
    primary that streams from it. The kept directory starts by hand (read-only, another port and socket) and
    holds the rows only the former primary had: nothing acknowledged was thrown away."""
    old, new = database(request, machine, rendered, "kept-rewind", 2)
    old.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(old, 1, 100, "both")
    wait_for("the rows on the replica", lambda: rows(new) == "both:100")
    new.stop("fast")
    fork_segment = old.sql("SELECT pg_walfile_name(pg_current_wal_lsn())")
    # The replica's slot would keep that WAL (for as long as max_slot_wal_keep_size allows): gone with it.
    old.sql("SELECT pg_drop_replication_slot('mydb_replica_1')")
    old.sql("ALTER SYSTEM SET wal_keep_size = 0")
    old.sql("SELECT pg_reload_conf()")
    write(old, 101, 150, "old-only")
    for _ in range(3):
        old.sql("SELECT pg_switch_wal()")
        old.sql("CHECKPOINT")
    assert not (old.pgdata / "pg_wal" / fork_segment).exists(), "the WAL of the fork is still there"
    old.stop()

    new.record(new)
    new.start()
    promote(new)
    write(new, 151, 180, "new-only")

    offset = len(old.logs())
    old.start()
    request.addfinalizer(lambda: [stop_kept(old, k) for k in kept_dirs(old)])
    log = old.logs()[offset:]
    assert "follow: pg_rewind failed" in log, log   # follow.sh's exit 3
    kept = kept_dirs(old)
    assert len(kept) == 1, (kept, log)
    [kept] = kept
    assert re.fullmatch(r"diverged-\d{8}T\d{6}Z", kept.name), kept.name
    info = kept_info(kept)
    assert info["reason"] == "rewind-failed", info
    assert info["pod"] == old.name and info["primary"] == new.name, info
    kept_at = datetime.datetime.strptime(info["keptAt"], "%Y-%m-%dT%H:%M:%SZ")
    assert kept.name == "diverged-" + kept_at.strftime("%Y%m%dT%H%M%SZ"), info
    assert info["timeline"] == "1", info
    assert re.fullmatch(LSN, info["checkpoint"]), info
    assert re.fullmatch(LSN, info["divergedAt"]), info
    assert re.fullmatch(r"[0-9A-F]{24}", info["walEnd"]) and (kept / "pg_wal" / info["walEnd"]).exists(), info
    assert int(info["bytes"]) > 1 << 20 and info["major"] == "15", info
    line = kept_line(log)
    assert str(kept) in line and "rewind-failed" in line and info["divergedAt"] in line, line

    # PGDATA: a clone of the new primary, streaming on its timeline; nothing of the old data in it.
    assert "replica-bootstrap: cloned" in log, log
    assert old.sql("SELECT pg_is_in_recovery()") == "t"
    wait_for("the clone to stream the new primary's rows", lambda: rows(old) == "both,new-only:130", timeout=30)
    streaming_from(new, 1)
    assert old.sql(SYSTEM_ID) == new.sql(SYSTEM_ID)
    assert old.sql("SELECT received_tli FROM pg_stat_wal_receiver") == new.sql(TIMELINE) == "2"

    sockets, port = start_kept_by_hand(old, kept)
    assert sql_on_kept(old, sockets, port, "SELECT pg_is_in_recovery()") == "t"
    assert sql_on_kept(old, sockets, port, "SELECT string_agg(DISTINCT written_on, ',' ORDER BY "
                       "written_on) || ':' || count(*) FROM t") == "both,old-only:150"
    stop_kept(old, kept)


@pytest.fixture
def small_volume(request, machine):
    """small_volume(path): a tmpfs mounted at PATH (a real filesystem of its own, to fill), owned by the
    pods' OS user; resize(path, bytes) remounts it larger or smaller. Unmounted at the test's end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")

    def mount(path: Path, size: int) -> Path:
        machine.mkdir(path)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(path)], check=False))
        if machine.user:
            shutil.chown(path, machine.user, machine.user)
        return path

    return mount


def resize(path: Path, size: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def free_bytes(path: Path) -> int:
    found = os.statvfs(path)
    return found.f_bavail * found.f_frsize


def used_bytes(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
               .stdout.split()[0])


def test_without_room_for_a_clone_beside_the_kept_data_the_pod_stops_and_keeps_it(
        request, machine, rendered, small_volume):
    """A replica's data volume (a small filesystem of its own) has room for one copy of the data and a half,
    not two. Its data must be replaced (here: of another major): the init container keeps it aside, finds the
    volume short of the kept directory's size plus 10 %, and exits 1 with one line naming the kept directory,
    its size, the free space and what to do; a restart says the same again (PGDATA is gone by then: the kept
    directory is what it measures). Nothing was removed: the kept directory still holds the replica's cluster.
    Once the volume is grown, the next start clones the primary beside the kept directory and streams."""
    own = machine.sibling("kept-room")
    volume = small_volume(own.root / "replica-data", 256 << 20)
    primary = DatabasePod(own, rendered, 0)
    replica = DatabasePod(own, rendered, 1, volume_dirs={"data": volume})
    for pod in (primary, replica):
        request.addfinalizer(pod.stop)
    primary.start()
    primary.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(primary, 1, 100, "primary")
    replica.start()
    wait_for("the rows on the replica", lambda: rows(replica) == "primary:100")
    replica.stop("fast")
    control = (replica.pgdata / "global" / "pg_control").read_bytes()
    size = used_bytes(replica.pgdata)
    resize(volume, size * 3 // 2)          # the data and half of it again: less than a clone needs
    assert free_bytes(volume) < size * 11 // 10
    (replica.pgdata / "PG_VERSION").write_text("14\n")

    for attempt in (1, 2):
        offset = len(replica.logs())
        code = replica.initialise(timeout=60)    # the init container alone: the pod's containers wait for it
        log = replica.logs()[offset:]
        assert code == 1, (attempt, code, log)
        kept = kept_dirs(replica)
        assert len(kept) == 1, (attempt, kept, log)
        [kept] = kept
        refusals = [line for line in log.splitlines() if "grow the volume" in line]
        assert len(refusals) == 1 and refusals[0] == log.strip().splitlines()[-1], log
        refusal = refusals[0]
        assert refusal.startswith("entrypoint: ") and str(kept) in refusal, refusal
        assert "spec.storage" in refusal and "data-" + replica.name in refusal, refusal
        assert f"{int(kept_info(kept)['bytes']) >> 20} MB" in refusal, refusal
        assert "replica-bootstrap: cloned" not in log, log
        assert not replica.pgdata.exists(), "PGDATA came back without a clone"
    info = kept_info(kept)
    assert info["reason"] == "major-mismatch" and info["major"] == "14", info
    assert (kept / "global" / "pg_control").read_bytes() == control, "the kept data changed"
    assert (kept / "PG_VERSION").read_text() == "14\n"

    resize(volume, size * 3)
    replica.start()
    wait_for("the clone to stream", lambda: rows(replica) == "primary:100", timeout=30)
    streaming_from(primary, 1)
    assert kept_dirs(replica) == [kept] and (kept / "global" / "pg_control").read_bytes() == control


def test_a_replica_of_another_major_is_kept_aside_then_cloned(request, machine, rendered):
    """A replica whose data is of another major than its server (the replicas after a major upgrade; here its
    PG_VERSION says 14): its init container moves the data aside to diverged-<UTC time> with reason
    major-mismatch and the data's major in mydb-kept.txt (no divergedAt: no rewind was tried), then clones the
    primary, which it streams from; the kept directory is the replica's data as it was."""
    primary, replica = database(request, machine, rendered, "kept-major", 2)
    primary.sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    write(primary, 1, 100, "primary")
    wait_for("the rows on the replica", lambda: rows(replica) == "primary:100")
    replica.stop("fast")
    control = (replica.pgdata / "global" / "pg_control").read_bytes()
    (replica.pgdata / "PG_VERSION").write_text("14\n")

    offset = len(replica.logs())
    replica.start()
    log = replica.logs()[offset:]
    kept = kept_dirs(replica)
    assert len(kept) == 1, (kept, log)
    [kept] = kept
    info = kept_info(kept)
    assert info["reason"] == "major-mismatch" and info["major"] == "14", info
    assert info["pod"] == replica.name and info["primary"] == primary.name, info
    assert info["divergedAt"] == "" and info["timeline"] == "1", info
    assert re.fullmatch(LSN, info["checkpoint"]) and int(info["bytes"]) > 0, info
    assert (kept / "global" / "pg_control").read_bytes() == control
    line = kept_line(log)
    assert str(kept) in line and "major-mismatch" in line, line
    assert "replica-bootstrap: cloned" in log, log
    wait_for("the clone to stream", lambda: rows(replica) == "primary:100", timeout=30)
    streaming_from(primary, 1)
    write(primary, 101, 110, "primary")
    wait_for("the new rows on the clone", lambda: rows(replica) == "primary:110", timeout=30)
