"""The continuous archive across a failover, on the machine's real PostgreSQL.

wal-archive.sh streams from the read-write Service; here that is a TCP forwarder on an address of its own
(the Service's ClusterIP), which the test points at the new primary after the promotion, as the Service's
endpoints move: the archive's script runs all along and finds the new primary by reconnecting. The operator's
part (the record, pg_promote()) is played by the test, as in test_failover.py.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mydb_operator.instances.probe import FACTS
from mydb_operator.model.instances import InstanceFacts, parse_history, parse_lsn
from mydb_operator.policy.archive import forked_behind_archive

from .harness import ArchivePod, BackupJob, DatabasePod, free_port, wait_for
from .test_archive import restoring, utc_now_of
from .test_failover import database, promote, rows, write

LSN = r"[0-9A-F]+/[0-9A-F]+"
SERVICE_IP = "127.0.0.9"   # in the loopback certificate's names, as the Service's name is in the real one's
TIMELINE = "SELECT timeline_id FROM pg_control_checkpoint()"


class Service:
    """The read-write Service: connections to SERVICE_IP:port are forwarded to `target` (a pod's address) at
    the database's port, read when each connection is made; a connection the target refuses is closed."""

    def __init__(self, target: str, pod_port: int):
        self.target = target
        self.pod_port = pod_port
        self.port = free_port((SERVICE_IP,))
        self.listener = socket.create_server((SERVICE_IP, self.port))
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:     # closed
                return
            try:
                upstream = socket.create_connection((self.target, self.pod_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):   # either side gone: the connection is
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        for end in self.sockets:
            end.close()


def archived_up_to(primary: DatabasePod) -> str:
    """Wait until the archive has flushed everything PRIMARY wrote so far; that position."""
    lsn = primary.sql("SELECT pg_current_wal_lsn()")
    wait_for(f"the archive to flush {lsn}", lambda: primary.sql(
        f"SELECT coalesce(bool_or(flush_lsn >= '{lsn}'), false) FROM pg_stat_replication"
        " WHERE application_name = 'mydb-archive'") == "t")
    return lsn


def archiving(request, name: str, pods: int = 2) -> tuple[list[DatabasePod], Service, ArchivePod, BackupJob]:
    """A database of PODS pods (test_failover.database), its archive streaming from ordinal 0 through the
    Service, one scheduled backup run done (a base backup on timeline 1), and table t."""
    machine, rendered = request.getfixturevalue("machine"), request.getfixturevalue("rendered")
    pods = database(request, machine, rendered, name, pods)
    own = pods[0].machine
    service = Service(pods[0].ip, own.port)
    request.addfinalizer(service.close)
    backups = own.mkdir(own.root / "backups")
    archive = ArchivePod(own, rendered, backups)
    archive.container.env.update(PGHOST=SERVICE_IP, PGPORT=str(service.port))
    request.addfinalizer(archive.stop)
    archive.start()
    job = BackupJob(own, rendered, backups)
    result = job.run()
    assert result.returncode == 0, result.stdout + result.stderr
    pods[0].sql("CREATE TABLE t (id int PRIMARY KEY, written_on text)")
    return pods, service, archive, job


def segments(wal: Path, timeline: int) -> list[str]:
    """The timeline's WAL files in the archive (complete and .partial), in order."""
    return sorted(p.name for p in wal.iterdir() if re.fullmatch(f"{timeline:08X}[0-9A-F]{{16}}(\\.partial)?", p.name))


def fork_of(wal: Path, timeline: int) -> str:
    """Where TIMELINE forked off its parent, as its history file in the archive says."""
    last = (wal / f"{timeline:08X}.history").read_text().strip().splitlines()[-1]
    return last.split("\t")[1]


def segment_of(lsn: str, timeline: int) -> str:
    """The name of the 16 MB segment that holds LSN on TIMELINE."""
    high, low = (int(part, 16) for part in lsn.split("/"))
    return f"{timeline:08X}{high:08X}{low >> 24:08X}"


def operator_sees(primary: DatabasePod, archived: str, on_timeline: int) -> dict | None:
    """What the operator reports of the archive past the fork (policy/archive.py), from its own query to the new
    PRIMARY and the archive's last position it saw on the former primary."""
    sql = FACTS.replace("$1", "'mydb_archive'").replace("$2", "'mydb_replica_'")
    row = json.loads(primary.sql(f"select row_to_json(facts) from ({sql}) facts"))
    facts = InstanceFacts(pod="new", in_recovery=row["in_recovery"], timeline=row["timeline"], wal_lsn=row["wal_lsn"],
                          switchpoints=tuple(parse_history(row["history"]).items()))
    [found] = forked_behind_archive(facts, {}, {on_timeline: parse_lsn(archived)}) or [None]
    return found


def streams_timeline_2(archive: ArchivePod) -> None:
    """Wait (a minute at most) for timeline 2's history file and a segment of it in the archive; the end of the
    archive's log when it does not come."""
    wal = archive.wal
    try:
        wait_for("the archive to stream timeline 2",
                 lambda: (wal / "00000002.history").exists() and segments(wal, 2), timeout=60)
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}\nthe archive's log ends:\n{archive.logs()[-1500:]}") from None


@pytest.mark.parametrize("ahead", ["by-a-segment", "within-the-segment"])
def test_an_archive_ahead_of_the_promoted_replica_keeps_the_lost_wal_and_streams_the_new_timeline(request, ahead):
    """The replica is cut off while the primary commits on, into the archive only (by-a-segment: into the
    next segment too, within-the-segment: into the one the replica stopped in); the primary crashes and the
    replica is promoted (timeline 2) and written to. By a segment, the new primary refuses the archive's
    old timeline past the fork, where the archive used to stay for ever; within the segment, it used to go
    on and leave the lost WAL mixed into its timeline-1 .partial. Now, within a minute, the archive keeps
    its timeline-1 WAL from the fork's segment on in diverged-wal/<UTC time>-tl1 with a true mydb-kept.txt,
    and streams timeline 2 from the fork (its history file, its segments). That proves both halves: a
    recovery to a moment after the failover has the rows of both primaries' timelines as the new primary
    has them, and the kept WAL holds every insert the failover lost (pg_waldump of the kept files, from the
    fork on)."""
    (old, new), service, archive, job = archiving(request, f"fork-{ahead}")
    write(old, 1, 100, "both")
    wait_for("the rows on the replica", lambda: rows(new) == "both:100")
    replica_end = new.sql("SELECT pg_last_wal_receive_lsn()")
    new.stop("fast")
    write(old, 101, 150, "lost")
    if ahead == "by-a-segment":
        old.sql("SELECT pg_switch_wal()")
    write(old, 151, 160, "lost")
    archive_end = archived_up_to(old)
    assert old.sql(f"SELECT '{archive_end}'::pg_lsn - '{replica_end}'::pg_lsn > 0") == "t"
    wal = archive.wal
    last = segments(wal, 1)[-1]
    assert last.endswith(".partial") and (last[:24] > segment_of(replica_end, 1)) == (ahead == "by-a-segment"), \
        (last, replica_end)
    old.stop()

    new.record(new)
    new.start()
    promote(new)
    wait_for("the promotion's checkpoint on timeline 2", lambda: new.sql(TIMELINE) == "2")
    write(new, 1001, 1030, "new")
    time.sleep(0.2)   # commit timestamps are the server's clock: keep the moment clear of the writes
    moment = utc_now_of(new)
    time.sleep(0.2)
    write(new, 2001, 2005, "after")   # recovery stops at the first commit after the moment: one the archive has
    service.target = new.ip

    streams_timeline_2(archive)
    archived_up_to(new)
    fork = fork_of(wal, 2)
    assert (wal / "00000002.history").read_text() == new.sql("SELECT pg_read_file('pg_wal/00000002.history')") + "\n"
    kept_dirs = sorted((archive.wal.parent / "diverged-wal").iterdir())
    assert len(kept_dirs) == 1, kept_dirs
    kept = kept_dirs[0]
    assert re.fullmatch(r"\d{8}T\d{6}Z-tl1", kept.name), kept.name
    info = dict(line.split("=", 1) for line in (kept / "mydb-kept.txt").read_text().splitlines())
    files = sorted(p.name for p in kept.iterdir() if p.name != "mydb-kept.txt")
    assert info["timeline"] == "1" and info["newTimeline"] == "2", info
    assert info["forkLsn"] == fork, (info, fork)
    assert files[0].removesuffix(".partial") == segment_of(fork, 1) and files[-1] == last, (files, fork, last)
    assert info["firstSegment"] == files[0] and info["lastSegment"] == files[-1], (info, files)
    assert re.fullmatch(LSN, info["archiveEnd"]), info
    assert new.sql(f"SELECT '{info['archiveEnd']}'::pg_lsn >= '{archive_end}'::pg_lsn") == "t", (info, archive_end)
    assert info["keptAt"] == f"{kept.name[:4]}-{kept.name[4:6]}-{kept.name[6:8]}T" \
                             f"{kept.name[9:11]}:{kept.name[11:13]}:{kept.name[13:15]}Z", info
    # The operator reports the same range from what it reads: the new primary's history, the archive's position.
    reported = operator_sees(new, archive_end, 1)
    assert reported is not None and (reported["timeline"], reported["from"], reported["to"]) == (
        1, fork, archive_end), (reported, fork, archive_end)
    [said] = [line for line in archive.logs().splitlines() if line.startswith("wal-archive: ") and str(kept) in line]
    assert fork in said and "timeline 2" in said, said
    # Nothing of timeline 1 past the fork's segment is left in the archive (its segment again, up to the fork).
    assert [s for s in segments(wal, 1) if s[8:24] > segment_of(fork, 1)[8:]] == [], segments(wal, 1)

    # The lost commits are in the kept WAL: every insert into t after the fork (pg_waldump reads files by their
    # segment names, .partial ones too under that name).
    machine = new.machine
    readable = machine.mkdir(machine.root / "kept-wal")
    for name in files:
        (readable / name.removesuffix(".partial")).symlink_to(kept / name)
    relation = "1663/" + new.sql("SELECT pg_relation_filepath('t')").removeprefix("base/")
    dumped = machine.run(["pg_waldump", "-p", str(readable), "-t", "1", "-s", fork, "-r", "Heap",
                          "--relation", relation], {"PATH": machine.path})
    inserts = [line for line in dumped.stdout.splitlines() if "desc: INSERT" in line]
    assert len(inserts) == 60, dumped.stdout + dumped.stderr

    # A recovery to a moment after the failover, from the base backup on timeline 1 through the fork.
    copy_pod = restoring(request, machine, "after-the-fork", SimpleNamespace(backups=job.backups),
                         pointInTime=moment)
    copy_pod.start(timeout=120)
    assert rows(copy_pod) == "both,new:130"
    assert int(copy_pod.sql(TIMELINE)) > 2


def test_a_switchover_moves_nothing_aside(request):
    """A clean stop of the primary sends the archive and the replica everything (the shutdown checkpoint
    included), so the replica promoted in its place forks off exactly where the archive ends, inside the
    archive's .partial segment: the archive goes on onto timeline 2 as pg_receivewal always did, and
    nothing is kept aside (the zeros after the fork in that .partial are no lost WAL)."""
    (old, new), service, archive, _ = archiving(request, "switchover")
    write(old, 1, 100, "both")
    wait_for("the rows on the replica", lambda: rows(new) == "both:100")
    last_seen = archived_up_to(old)
    old.stop("fast")
    new.record(new)
    promote(new)
    write(new, 101, 110, "new")
    assert operator_sees(new, last_seen, 1) is None  # nothing lost, nothing reported
    service.target = new.ip
    wal = archive.wal
    streams_timeline_2(archive)
    assert segments(wal, 1)[-1] == segment_of(fork_of(wal, 2), 1) + ".partial", segments(wal, 1)
    assert not (wal.parent / "diverged-wal").exists()
    assert "wal-archive: the archive had" not in archive.logs(), archive.logs()
