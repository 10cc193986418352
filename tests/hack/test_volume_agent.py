"""hack/volume_agent.py: which folders it makes and removes, and that it follows a real list+watch.

The agent is a stdlib-only script outside the package, so it is imported from
its path. The last tests run it as a process against a fake API server (plain
HTTP, chunked watch lines, as the real one sends them).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENT_PY = REPO / "hack" / "volume_agent.py"
_spec = importlib.util.spec_from_file_location("volume_agent", AGENT_PY)
agent = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = agent  # dataclasses look their module up there
_spec.loader.exec_module(agent)

DIR = "/var/lib/cluster/state/volumes"


def pv(name: str, path: str | None = None, *, rv: str = "1") -> dict:
    spec = {"hostPath": {"path": path, "type": "Directory"}} if path else {"csi": {"driver": "x", "volumeHandle": name}}
    return {"kind": "PersistentVolume", "metadata": {"name": name, "resourceVersion": rv}, "spec": spec}


# ------------------------------------------------------------------ decisions


@pytest.mark.parametrize("path, expected", [
    (f"{DIR}/pvc-1", "pvc-1"),
    (f"{DIR}/pvc-1/", "pvc-1"),  # a trailing slash names the same folder
    (f"{DIR}//pvc-1", "pvc-1"),
    (f"{DIR}/pvc-1/data", None),  # nested: not ours
    (f"{DIR}/../pvc-1", None),  # escapes the folder
    (f"{DIR}/..", None),
    (DIR, None),  # the volume folder itself is never a volume
    ("/var/lib/cluster/state/volumes-other/pvc-1", None),  # a prefix, not a parent
    ("/tmp/pvc-1", None),
    ("pvc-1", None),  # relative
])
def test_volume_folder_only_for_paths_directly_under_the_volume_dir(path, expected):
    assert agent.volume_folder(pv("p", path), DIR) == expected


def test_volume_folder_ignores_volumes_without_host_path():
    assert agent.volume_folder(pv("p"), DIR) is None
    assert agent.volume_folder({"metadata": {"name": "p"}}, DIR) is None


def test_volume_dir_given_with_trailing_slash_still_matches():
    assert agent.volume_folder(pv("p", f"{DIR}/pvc-1"), DIR + "/") == "pvc-1"


def test_folders_to_create_are_the_named_missing_ones():
    pvs = [pv("a", f"{DIR}/pvc-a"), pv("b", f"{DIR}/pvc-b"), pv("c"), pv("d", "/elsewhere/pvc-d")]
    assert agent.folders_to_create(pvs, {"pvc-a", "stray"}, DIR) == ["pvc-b"]
    assert agent.folders_to_create(pvs, {"pvc-a", "pvc-b"}, DIR) == []
    assert agent.folders_to_create([], set(), DIR) == []


def test_folders_to_remove_are_the_existing_unnamed_ones():
    pvs = [pv("a", f"{DIR}/pvc-a"), pv("d", "/elsewhere/stray")]
    existing = {"pvc-a", "pvc-gone", ".creating-pvc-x", "stray"}
    # A PV outside the folder protects nothing inside it; a half-made folder is removed too.
    assert agent.folders_to_remove(pvs, existing, DIR) == [".creating-pvc-x", "pvc-gone", "stray"]
    assert agent.folders_to_remove(pvs, {"pvc-a"}, DIR) == []
    assert agent.folders_to_remove([], {"pvc-a"}, DIR) == ["pvc-a"]


def test_two_volumes_naming_one_folder_keep_it_until_both_are_gone():
    both = [pv("a", f"{DIR}/shared"), pv("b", f"{DIR}/shared/")]
    assert agent.folders_to_remove(both[1:], {"shared"}, DIR) == []
    assert agent.folders_to_remove([], {"shared"}, DIR) == ["shared"]


# ---------------------------------------------------------------- the folders


def test_created_folder_is_mode_0777_despite_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        agent.create_folder(str(tmp_path), "pvc-1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "pvc-1").stat().st_mode) == 0o777
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pvc-1"]  # no temporary left behind


def test_create_replaces_a_leftover_temporary(tmp_path):
    (tmp_path / ".creating-pvc-1").mkdir()
    (tmp_path / ".creating-pvc-1" / "junk").write_text("x")
    agent.create_folder(str(tmp_path), "pvc-1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pvc-1"]
    assert list((tmp_path / "pvc-1").iterdir()) == []


def test_existing_folders_are_plain_folders_only(tmp_path):
    (tmp_path / "pvc-1").mkdir()
    (tmp_path / "a-file").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "a-link").symlink_to(outside)
    assert agent.existing_folders(str(tmp_path)) == {"pvc-1"}
    assert agent.folder_exists(str(tmp_path), "a-link") == set()
    assert agent.folder_exists(str(tmp_path), "pvc-1") == {"pvc-1"}


def test_apply_goes_on_after_a_failure(tmp_path, capsys):
    (tmp_path / "pvc-b").write_text("a file where the folder should be")
    agent.apply(str(tmp_path), ["pvc-a", "pvc-b", "pvc-c"], [])
    assert (tmp_path / "pvc-a").is_dir() and (tmp_path / "pvc-c").is_dir()
    assert "could not create" in capsys.readouterr().out


def test_events_create_and_remove_folders(tmp_path):
    volumes = str(tmp_path)
    worker = agent.Agent(server=None, volume_dir=volumes)
    assert worker.handle({"type": "ADDED", "object": pv("a", f"{volumes}/pvc-a", rv="5")}) == "5"
    assert worker.handle({"type": "ADDED", "object": pv("b", f"{volumes}/pvc-a", rv="6")}) == "6"
    assert (tmp_path / "pvc-a").is_dir()
    (tmp_path / "pvc-a" / "PG_VERSION").write_text("15")
    # A MODIFIED event (the PV bound, grown) leaves the folder and its data alone.
    worker.handle({"type": "MODIFIED", "object": pv("a", f"{volumes}/pvc-a", rv="7")})
    assert (tmp_path / "pvc-a" / "PG_VERSION").read_text() == "15"
    # b still names the folder after a is deleted.
    worker.handle({"type": "DELETED", "object": pv("a", f"{volumes}/pvc-a", rv="8")})
    assert (tmp_path / "pvc-a").is_dir()
    worker.handle({"type": "DELETED", "object": pv("b", f"{volumes}/pvc-a", rv="9")})
    assert not (tmp_path / "pvc-a").exists()
    assert worker.handle({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}) == "12"


def test_error_events_end_the_watch(tmp_path):
    worker = agent.Agent(server=None, volume_dir=str(tmp_path))
    with pytest.raises(agent.Gone):
        worker.handle({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})
    with pytest.raises(agent.ApiError):
        worker.handle({"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "boom"}})


# ----------------------------------------------------------------- kubeconfig


def test_parse_kubeconfig_json_picks_the_current_context():
    config = {
        "clusters": [{"name": "other", "cluster": {"server": "https://10.0.0.1"}},
                     {"name": "local", "cluster": {"server": "https://127.0.0.1:16443",
                                                   "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "admin", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "ctx",
    }
    found = agent.parse_kubeconfig(json.dumps(config))
    assert found == {"server": "https://127.0.0.1:16443", "certificate-authority-data": "Q0E=",
                     "client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}


def test_parse_kubeconfig_yaml():
    text = ("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n"
            "    server: https://127.0.0.1:16443\n  name: local\nusers:\n- name: admin\n  user:\n"
            "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n")
    found = agent.parse_kubeconfig(text)
    assert found["server"] == "https://127.0.0.1:16443"
    assert found["client-key-data"] == "S0VZ"


def test_parse_kubeconfig_without_server_is_an_error():
    with pytest.raises(ValueError):
        agent.parse_kubeconfig(json.dumps({"clusters": [], "contexts": [], "users": []}))


# ------------------------------------------------- against a fake API server


class FakeApiServer:
    """Serves GET /api/v1/persistentvolumes: a paged list, and a chunked watch fed from a queue."""

    def __init__(self, pvs: list[dict]) -> None:
        self.pvs = pvs
        self.events: queue.Queue = queue.Queue()
        self.watches = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                assert url.path == "/api/v1/persistentvolumes"
                if query.get("watch") == "1":
                    fake.watches += 1
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    deadline = time.monotonic() + float(query["timeoutSeconds"])
                    while time.monotonic() < deadline:
                        try:
                            event = fake.events.get(timeout=0.1)
                        except queue.Empty:
                            continue
                        if event is None:
                            break
                        line = json.dumps(event).encode() + b"\n"
                        # Split each line over two chunks, as a server may.
                        for part in (line[:7], line[7:]):
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                # A list in pages of one item, to exercise `continue`.
                start = int(query.get("continue") or 0)
                page = {"kind": "PersistentVolumeList", "items": fake.pvs[start:start + 1],
                        "metadata": {"resourceVersion": "100"}}
                if start + 1 < len(fake.pvs):
                    page["metadata"]["continue"] = str(start + 1)
                body = json.dumps(page).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeApiServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.events.put(None)
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def server(self):
        return agent.Server(host="127.0.0.1", port=self.httpd.server_address[1], context=None)


def test_list_follows_continue_tokens():
    pvs = [pv(f"p{i}", f"{DIR}/pvc-{i}") for i in range(3)]
    with FakeApiServer(pvs) as fake:
        items, resource_version = agent.list_objects(fake.server)
    assert [p["metadata"]["name"] for p in items] == ["p0", "p1", "p2"]
    assert resource_version == "100"


def test_watch_reads_events_across_chunks():
    with FakeApiServer([]) as fake:
        for i in range(3):
            fake.events.put({"type": "ADDED", "object": pv(f"p{i}", f"{DIR}/pvc-{i}", rv=str(101 + i))})
        fake.events.put(None)  # the server ends the watch
        events = list(agent.watch_objects(fake.server, "100"))
    assert [e["object"]["metadata"]["name"] for e in events] == ["p0", "p1", "p2"]


def wait_until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {check.__doc__}")


def test_agent_process_follows_list_and_watch_and_stops_on_sigterm(tmp_path):
    volumes = tmp_path / "volumes"
    volumes.mkdir()
    (volumes / "pvc-stale").mkdir()  # left from a PV deleted while the agent was down
    (volumes / "pvc-stale" / "data").write_text("old")
    (volumes / "not-a-folder").write_text("files are left alone")
    pvs = [pv("p1", f"{volumes}/pvc-1"), pv("p2", f"{volumes}/pvc-2"), pv("other")]
    with FakeApiServer(pvs) as fake:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{fake.httpd.server_address[1]}"}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}))
        process = subprocess.Popen([sys.executable, str(AGENT_PY), "--kubeconfig", str(kubeconfig),
                                    "--volume-dir", str(volumes)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        try:
            def listed():
                """the folders of the listed PVs, and the stale one gone"""
                return (sorted(p.name for p in volumes.iterdir()) == ["not-a-folder", "pvc-1", "pvc-2"]
                        and fake.watches == 1)
            wait_until(listed)
            assert stat.S_IMODE((volumes / "pvc-1").stat().st_mode) == 0o777

            fake.events.put({"type": "ADDED", "object": pv("p3", f"{volumes}/pvc-3", rv="101")})
            fake.events.put({"type": "DELETED", "object": pv("p1", f"{volumes}/pvc-1", rv="102")})

            def followed():
                """pvc-3 made and pvc-1 removed from the watch"""
                return sorted(p.name for p in volumes.iterdir()) == ["not-a-folder", "pvc-2", "pvc-3"]
            wait_until(followed)

            # A 410 Gone in the stream makes it relist; the new list shows changes the watch
            # never reported (p2 gone, p4 new), and the relist catches up with them.
            fake.pvs = [pv("p3", f"{volumes}/pvc-3"), pv("p4", f"{volumes}/pvc-4"), pv("other")]
            fake.events.put({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})

            def relisted():
                """pvc-4 made, pvc-2 removed, and a second watch after the relist"""
                return (sorted(p.name for p in volumes.iterdir()) == ["not-a-folder", "pvc-3", "pvc-4"]
                        and fake.watches == 2)
            wait_until(relisted)
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0, output
    assert "stopping (SIGTERM)" in output
    assert "Traceback" not in output
    # One line per action, each with a timestamp.
    actions = [line for line in output.splitlines() if " created " in line or " removed " in line]
    # pvc-1, pvc-2 made, pvc-stale removed; pvc-3 made, pvc-1 removed; pvc-4 made, pvc-2 removed
    assert len(actions) == 7, output
    assert all(line[:4].isdigit() and line[10] == "T" for line in actions)


def test_client_certificate_and_ca_come_from_the_kubeconfig(tmp_path):
    """A kubeconfig with *-data fields yields a TLS context that holds the client certificate."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=t",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem"), "-days", "1"],
                   check=True, capture_output=True)
    data = {name: base64.b64encode((tmp_path / name).read_bytes()).decode() for name in ("k.pem", "c.pem")}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:16443",
                                               "certificate-authority-data": data["c.pem"]}}],
        "users": [{"name": "u", "user": {"client-certificate-data": data["c.pem"], "client-key-data": data["k.pem"]}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}))
    server = agent.server_from_kubeconfig(str(kubeconfig))
    assert (server.host, server.port) == ("127.0.0.1", 16443)
    assert server.context is not None and server.context.check_hostname
    assert len(server.context.get_ca_certs()) == 1
