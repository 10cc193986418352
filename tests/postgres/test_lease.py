"""The chart's lease.pl (the primary lease, docs/high-availability.md "A primary that fences itself") against
an HTTPS API server of the test's own: the real script, in the host's perl with the image's modules, a
process standing in for the postmaster (its PID in the socket's lock file, as PostgreSQL writes it).

What it must do: renew the Lease while it names this pod; say "absent" and stop nothing without a Lease;
stop the server at once when the Lease names another pod; and stop it once it could not confirm the Lease
for LEASE_FENCE_SECONDS, not before."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LEASE = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/db-primary"
SCRIPT = Path(__file__).resolve().parents[2] / "charts" / "mydatabase" / "scripts" / "lease.pl"
FENCE_SECONDS = 3


class FakeApi:
    """The Lease as an API server keeps it: GET, PUT at its resourceVersion (409 otherwise), 404 when absent;
    every request answered 503 while `down`."""

    def __init__(self) -> None:
        self.members = "db-0,db-1"
        self.lease: dict | None = None
        self.down = False
        self.hangs = False  # every request answered only after 3 s (lease.pl gives up after 1)
        self.renewals = 0
        self.tokens: list[str] = []

    def name(self, holder: str) -> None:
        version = int((self.lease or {}).get("metadata", {}).get("resourceVersion", "0")) + 1
        # managedFields as an API server sends them: their keys name the same fields, and must not be read.
        managed = [{"manager": "mydb-operator", "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}}]
        self.lease = {"metadata": {"name": "db-primary", "resourceVersion": str(version), "managedFields": managed,
                                   "annotations": {"myapp.example.com/members": self.members}},
                      "spec": {"holderIdentity": holder}}


def handler_for(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def answer(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            api.tokens.append(self.headers.get("Authorization", ""))
            if api.hangs:
                time.sleep(3)
            if api.down or api.hangs:
                self.answer(503, {})
            elif self.path != LEASE or api.lease is None:
                self.answer(404, {"kind": "Status", "code": 404})
            else:
                self.answer(200, api.lease)

        def do_PATCH(self) -> None:
            """A merge patch of the renewal time, with the resourceVersion read as its precondition."""
            assert self.headers["Content-Type"] == "application/merge-patch+json"
            patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if api.down:
                self.answer(503, {})
            elif api.lease is None or patch["metadata"]["resourceVersion"] != api.lease["metadata"]["resourceVersion"]:
                self.answer(409, {"kind": "Status", "code": 409})
            else:
                api.renewals += 1
                api.lease["spec"].update(patch["spec"])
                api.lease["metadata"]["resourceVersion"] = str(int(patch["metadata"]["resourceVersion"]) + 1)
                self.answer(200, api.lease)

    return Handler


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "ca.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class Peer:
    """The other member's probe.pl, as far as GET /peer goes: it answers `says` (None: 409)."""

    def __init__(self) -> None:
        self.says: str | None = None
        self.asked: list[str] = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                peer.asked.append(self.path)
                body = (peer.says or "this pod reaches the API server\n").encode()
                self.send_response(200 if peer.says else 409)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Pod:
    """lease.pl for pod db-0, a stand-in postmaster, and what lease.pl wrote."""

    def __init__(self, root: Path, port: int, probe_port: int = 1) -> None:
        self.state = root / "lease"
        # SIGINT as PostgreSQL takes it (its own handler): a process started in the background of a shell (make
        # test's) would inherit it ignored.
        default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
        self.postmaster = subprocess.Popen(["sleep", "600"], preexec_fn=default_sigint)
        sockets = root / "run"
        sockets.mkdir()
        (sockets / ".s.PGSQL.5432.lock").write_text(f"{self.postmaster.pid}\n/data\n")
        env = {"PATH": os.environ["PATH"], "POD_NAME": "db-0", "LEASE_NAME": "db-primary",
               "LEASE_RENEW_SECONDS": "1", "LEASE_FENCE_SECONDS": str(FENCE_SECONDS),
               "LEASE_STATE_DIR": str(self.state), "SERVICE_ACCOUNT_DIR": str(root / "account"),
               "SOCKET_DIR": str(sockets), "KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(port), "PEER_DOMAIN": "unused.invalid", "PGDATA": str(root / "pgdata"),
               "PROBE_PORT": str(probe_port)}
        self.pgdata = root / "pgdata"
        self.pgdata.mkdir()
        self.log = root / "lease.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(["perl", str(SCRIPT)], env=env, stdout=out, stderr=subprocess.STDOUT)

    def said(self) -> str:
        path = self.state / "state"
        return path.read_text().strip() if path.exists() else ""

    def server_running(self) -> bool:
        return self.postmaster.poll() is None

    def stop(self) -> None:
        for process in (self.process, self.postmaster):
            process.kill()
            process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApi, Pod]]:
    account = tmp_path / "account"
    account.mkdir()
    cert, key = certificate(account)
    (account / "token").write_text("the-token\n")
    (account / "namespace").write_text("ns\n")
    api = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(api))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    peer = Peer()
    pod = Pod(tmp_path, server.server_address[1], peer.port)
    api.peer = peer
    try:
        yield api, pod
    finally:
        pod.stop()
        server.shutdown()


def eventually(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_without_a_lease_nothing_is_fenced(cluster):
    """The chart installed without the operator: no Lease, the server serves."""
    api, pod = cluster
    assert eventually(lambda: pod.said() == "absent"), pod.log.read_text()
    time.sleep(FENCE_SECONDS + 1)
    assert pod.server_running() and pod.said() == "absent"
    assert set(api.tokens) == {"Bearer the-token"}


def test_the_holder_renews_and_stops_its_server_once_it_cannot_confirm_for_the_deadline(cluster):
    api, pod = cluster
    api.name("db-0")
    assert eventually(lambda: pod.said() == "held" and api.renewals >= 2), pod.log.read_text()
    api.down = True
    cut = time.monotonic()
    # No peer vouches (none answers): the server goes at the deadline, counted from the last confirmation.
    assert eventually(lambda: not pod.server_running(), timeout=FENCE_SECONDS + 3), pod.log.read_text()
    stopped_after = time.monotonic() - cut
    assert FENCE_SECONDS - 1.5 <= stopped_after <= FENCE_SECONDS + 1, stopped_after
    assert pod.said().startswith("fenced the lease was not confirmed"), pod.said()
    # Back, and named: it says so, for entrypoint.sh to start the server as primary again.
    api.down = False
    assert eventually(lambda: pod.said() == "held"), pod.log.read_text()


def test_a_holder_the_lease_no_longer_names_stops_its_server_at_once(cluster):
    api, pod = cluster
    api.name("db-0")
    assert eventually(lambda: pod.said() == "held"), pod.log.read_text()
    api.name("db-1")  # the operator named another primary
    named = time.monotonic()
    assert eventually(lambda: not pod.server_running(), timeout=5), pod.log.read_text()
    assert time.monotonic() - named < 2.5  # the next read, not the deadline
    assert pod.said() == "follower"
    assert (pod.state / "holder").read_text().strip() == "db-1"


def test_a_pod_the_lease_does_not_name_stops_nothing_when_the_api_server_goes(cluster):
    api, pod = cluster
    api.name("db-1")
    assert eventually(lambda: pod.said() == "follower"), pod.log.read_text()
    api.down = True
    time.sleep(FENCE_SECONDS + 1)
    assert pod.server_running()
    assert (pod.state / "api").read_text().strip() == "failed"


def test_a_holder_the_api_server_does_not_answer_goes_on_while_every_other_member_vouches_for_it(cluster):
    """The API server away: the other member (by its address in the members annotation, no name lookup) says
    it follows this pod and read the lease naming it AGE seconds ago; confirmed as of then, it serves on. Once
    the member no longer vouches (it was pointed at another primary), it stops within the deadline."""
    api, pod = cluster
    api.members = "db-0=,db-1=127.0.0.1"
    api.name("db-0")
    assert eventually(lambda: pod.said() == "held"), pod.log.read_text()
    api.peer.says = "age=0.5\n"
    api.down = True
    time.sleep(FENCE_SECONDS + 2)
    assert pod.server_running() and pod.said() == "held", pod.log.read_text()
    assert api.peer.asked and set(api.peer.asked) == {"/peer?primary=db-0"}
    api.peer.says = None
    refused = time.monotonic()
    assert eventually(lambda: not pod.server_running(), timeout=FENCE_SECONDS + 3), pod.log.read_text()
    assert time.monotonic() - refused <= FENCE_SECONDS + 1


def test_a_standby_the_lease_named_and_no_longer_names_goes_on(cluster):
    """A switchover's target, named while still a standby, then not (the switchover aborted): it never took a
    write, so its server goes on as it is, a replica again."""
    api, pod = cluster
    (pod.pgdata / "standby.signal").write_text("")
    api.name("db-0")
    assert eventually(lambda: pod.said() == "held"), pod.log.read_text()
    api.name("db-1")
    assert eventually(lambda: pod.said() == "follower"), pod.log.read_text()
    time.sleep(1)
    assert pod.server_running(), pod.log.read_text()


def test_an_api_server_that_hangs_does_not_delay_the_deadline(cluster):
    """Requests that time out (1 s each) and a peers' round (1.5 s) block lease.pl's loop: the server still
    stops at the deadline, not after them."""
    api, pod = cluster
    api.name("db-0")
    assert eventually(lambda: pod.said() == "held" and api.renewals >= 2), pod.log.read_text()
    api.hangs = True
    cut = time.monotonic()
    assert eventually(lambda: not pod.server_running(), timeout=FENCE_SECONDS + 3), pod.log.read_text()
    assert time.monotonic() - cut <= FENCE_SECONDS + 0.5, pod.log.read_text()
