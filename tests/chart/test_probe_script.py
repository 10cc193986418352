"""scripts/probe.pl, the probe container's server, against servers that answer as PostgreSQL does in each state: its
answers to the kubelet's GET /ready and /alive, and `probe.pl ask`'s exit codes (pg_isready's). A real server
answers it in the PostgreSQL harness (tests/postgres: every pod's start waits on it) and on real pods (e2e)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[2] / "charts" / "mydatabase" / "scripts" / "probe.pl"
PGPORT = "5432"


def error(code: str, message: str) -> bytes:
    """A backend's ErrorResponse: severity, SQLSTATE, message."""
    fields = b"".join(kind + text.encode() + b"\0" for kind, text in
                      ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", code), (b"M", message))) + b"\0"
    return b"E" + struct.pack("!I", 4 + len(fields)) + fields


SASL = b"R" + struct.pack("!II", 23, 10) + b"SCRAM-SHA-256\0\0"  # the password request of scram auth
REPLIES = {
    "accepting": SASL,
    "starting": error("57P03", "the database system is starting up"),
    "too many clients": error("53300", "sorry, too many clients already"),  # up: pg_isready says accepting
    "hung": None,  # takes the connection, never answers
}


class FakeServer:
    """A unix socket where PostgreSQL's would be, answering each startup packet with REPLY; it keeps what
    it was sent."""

    def __init__(self, directory: Path, reply: bytes | None) -> None:
        self.reply = reply
        self.packets: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(directory / f".s.PGSQL.{PGPORT}"))
        self.listener.listen(8)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            length = struct.unpack("!I", connection.recv(4))[0]
            self.packets.append(connection.recv(length - 4))
            if self.reply is None:
                self.held.append(connection)
                continue
            connection.sendall(self.reply)
            connection.close()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


def free_port() -> int:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return int(spare.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str, float]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.request("GET", path)
    response = connection.getresponse()
    answer = response.status, response.read().decode().strip(), time.monotonic() - started
    connection.close()
    return answer


def start_probe(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`probe.pl serve` on a free port, asking the socket in `directory`, once it answers HTTP: its stop
    signals' handlers are set by then (a signal before them would be ignored or kill it)."""
    # A free port of its own: the script's default (8008) is one port for every test that runs at once.
    port = free_port()
    env = {"PATH": os.environ["PATH"], "SOCKET_DIR": str(directory), "PGPORT": PGPORT, "PROBE_PORT": str(port)}
    process = subprocess.Popen(["perl", str(PROBE), "serve"], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            get(port, "/alive")
            return process, port
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr and process.stderr.read()
            time.sleep(0.02)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    process, port = start_probe(tmp_path)
    yield port
    process.send_signal(signal.SIGINT)  # the postgres images' STOPSIGNAL: PID 1 of its container needs a handler
    assert process.wait(timeout=5) == 0


@pytest.mark.parametrize("state, ready, alive", [
    ("accepting", 200, 200),
    ("too many clients", 200, 200),
    ("starting", 503, 200),
    ("hung", 503, 503),
    ("no server", 503, 503),
])
def test_ready_and_alive_answer_as_pg_isready_would(served, tmp_path, state, ready, alive):
    """/ready: the server accepts connections (readiness, startup); /alive: it answers at all, so a crash
    recovery (57P03, rejecting) is left to finish and one that does not answer within the probe's second is
    restarted."""
    server = FakeServer(tmp_path, REPLIES[state]) if state != "no server" else None
    try:
        ready_answer, alive_answer = get(served, "/ready"), get(served, "/alive")
    finally:
        if server:
            server.close()
    assert (ready_answer[0], alive_answer[0]) == (ready, alive), (ready_answer, alive_answer)
    assert ready_answer[2] < 1 and alive_answer[2] < 1, "an answer must come within the probes' timeout"
    if server:
        user = server.packets[0][4:]  # after the protocol version: 3.0
        assert server.packets[0][:4] == struct.pack("!I", 196608) and b"user\0postgres\0" in user


def test_unknown_paths_are_not_found(served):
    assert get(served, "/")[0] == 404 and get(served, "/ready/x")[0] == 404


@pytest.mark.parametrize("state, code", [("accepting", 0), ("starting", 1), ("hung", 2), ("no server", 2)])
def test_ask_exits_with_pg_isreadys_codes(tmp_path, state, code):
    server = FakeServer(tmp_path, REPLIES[state]) if state != "no server" else None
    env = {"PATH": os.environ["PATH"], "SOCKET_DIR": str(tmp_path), "PGPORT": PGPORT}
    try:
        asked = subprocess.run(["perl", str(PROBE), "ask"], env=env, capture_output=True, text=True, timeout=10)
    finally:
        if server:
            server.close()
    assert asked.returncode == code, asked


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGQUIT])
def test_other_stop_signals_end_it_at_once(tmp_path, stop):
    """An image whose STOPSIGNAL is SIGTERM (or SIGQUIT) stops it as promptly as SIGINT does (the fixture's):
    without a handler, the kubelet would wait out the pod's grace period."""
    process, _ = start_probe(tmp_path)
    process.send_signal(stop)
    assert process.wait(timeout=5) == 0
