#!/usr/bin/env python3
"""The node side of the local storage driver: real folders for hostPath PersistentVolumes.

kwok's provisioning Stage (hack/kwok/volume-provision.yaml) answers a claim of
the `standard` or `fixed-size` class with a PersistentVolume whose source is
`hostPath: {path: <volume dir>/pvc-<claim uid>, type: Directory}`.  This agent
makes that folder exist on this machine, so a pod on the real node can mount it
(type Directory: the kubelet waits for the folder rather than making it
root-owned 0755), and removes it once no PersistentVolume refers to it any
more, so the reclaim policy Delete really deletes the data.

    python3 hack/volume_agent.py --kubeconfig PATH --volume-dir DIR

It lists the PersistentVolumes, then watches them (reconnecting, and relisting
after an error or 410 Gone), and:

- creates, mode 0777, every folder directly under DIR that a PV names;
- removes every folder directly under DIR that no PV names: the deleted PV's
  folder after a DELETED event, and any such folder at every (re)list, which
  also catches deletions missed while it was not running.

Paths outside DIR, nested paths and anything that is not a plain folder
(files, symlinks) are never touched.  Each action is logged on one line with a
timestamp.  SIGTERM (or SIGINT) ends it cleanly.  Only the standard library is
used: hack/cluster.py starts it before any venv exists.  The decisions are
pure functions (volume_folder, folders_to_create, folders_to_remove), tested
in tests/hack/test_volume_agent.py.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, NoReturn

# A JSON object as the API server sends it (a PersistentVolume, a watch event): its fields are read with care.
Json = dict[str, Any]

# Ask the server to end each watch after this long; the socket gives up a bit
# later if the server went silent (no event and no bookmark) in between.
WATCH_TIMEOUT_SECONDS = 240
SOCKET_SLACK_SECONDS = 30
LIST_PAGE_SIZE = 500
RETRY_SECONDS = (0.5, 1, 2, 4, 8)  # backoff between failed attempts, capped at the last
TEMP_PREFIX = ".creating-"  # a folder being made; renamed into place once its mode is set
# PostgreSQL in the chart's pods runs as uid 999, and the kubelet applies no
# fsGroup to hostPath volumes, so the folder must be writable by anyone, as
# rancher's local-path-provisioner makes its folders.
FOLDER_MODE = 0o777


# ------------------------------------------------------------------ decisions


def volume_folder(pv: Json, volume_dir: str) -> str | None:
    """The name of the folder directly under volume_dir that this PV's hostPath names, else None."""
    path = ((pv.get("spec") or {}).get("hostPath") or {}).get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    path = os.path.normpath(path)
    name = os.path.basename(path)
    if os.path.dirname(path) != os.path.normpath(volume_dir) or name in ("", ".", ".."):
        return None
    return name


def wanted_folders(pvs: Iterable[Json], volume_dir: str) -> set[str]:
    names = (volume_folder(pv, volume_dir) for pv in pvs)
    return {name for name in names if name is not None}


def folders_to_create(pvs: Iterable[Json], existing: Iterable[str], volume_dir: str) -> list[str]:
    """Folders (names under volume_dir) that some PV names and that do not exist yet, sorted."""
    return sorted(wanted_folders(pvs, volume_dir) - set(existing))


def folders_to_remove(pvs: Iterable[Json], existing: Iterable[str], volume_dir: str) -> list[str]:
    """Existing folders (names under volume_dir) that no PV names, sorted."""
    return sorted(set(existing) - wanted_folders(pvs, volume_dir))


# ----------------------------------------------------------------- the folders


def log(message: str) -> None:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(f"{stamp} {message}", flush=True)


def existing_folders(volume_dir: str) -> set[str]:
    """Names of the plain folders (not symlinks, not files) directly under volume_dir."""
    with os.scandir(volume_dir) as entries:
        return {entry.name for entry in entries if entry.is_dir(follow_symlinks=False)}


def folder_exists(volume_dir: str, name: str) -> set[str]:
    """{name} if volume_dir/name is a plain folder, else the empty set."""
    path = os.path.join(volume_dir, name)
    return {name} if os.path.isdir(path) and not os.path.islink(path) else set()


def create_folder(volume_dir: str, name: str) -> None:
    """Make volume_dir/name with mode 0777, atomically: it appears only once its mode is set."""
    temp = os.path.join(volume_dir, TEMP_PREFIX + name)
    if os.path.isdir(temp) and not os.path.islink(temp):
        shutil.rmtree(temp)  # left over from an interrupted creation
    os.mkdir(temp)
    os.chmod(temp, FOLDER_MODE)  # mkdir's mode is cut by the umask
    os.rename(temp, os.path.join(volume_dir, name))
    log(f"created {os.path.join(volume_dir, name)} (mode {FOLDER_MODE:o})")


def remove_folder(volume_dir: str, name: str) -> None:
    shutil.rmtree(os.path.join(volume_dir, name))
    log(f"removed {os.path.join(volume_dir, name)}: no PersistentVolume refers to it")


def apply(volume_dir: str, create: list[str], remove: list[str]) -> None:
    """Carry out the decisions; one failed folder is logged and does not stop the others."""
    for action, names in ((create_folder, create), (remove_folder, remove)):
        for name in names:
            try:
                action(volume_dir, name)
            except OSError as error:
                log(f"could not {action.__name__.split('_')[0]} {os.path.join(volume_dir, name)}: {error}")


# ------------------------------------------------------------------ API access


@dataclass
class Server:
    host: str
    port: int
    context: ssl.SSLContext | None  # None: plain http
    token: str | None = None

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.context)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "mydb-volume-agent"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


def parse_kubeconfig(text: str) -> dict[str, str]:
    """server, CA, client credentials of the current context, from a kubeconfig.

    hack/cluster.py writes kubeconfigs as JSON (which is YAML); a YAML one with a
    single cluster and user (as `kubectl config view --raw --minify` prints) is
    read key by key, since there is no YAML parser in the standard library."""
    keys = (
        "server",
        "certificate-authority-data",
        "certificate-authority",
        "client-certificate-data",
        "client-certificate",
        "client-key-data",
        "client-key",
        "token",
    )
    try:
        config = json.loads(text)
    except ValueError:
        return _parse_yaml_kubeconfig(text, keys)
    current = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    context: Json = contexts.get(current) or next(iter(contexts.values()), {})
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
    cluster: Json = clusters.get(context.get("cluster")) or next(iter(clusters.values()), {})
    user = users.get(context.get("user")) or next(iter(users.values()), {})
    found = {key: value for key, value in {**cluster, **user}.items() if key in keys and isinstance(value, str)}
    if "server" not in found:
        raise ValueError("no server in the kubeconfig")
    return found


def _parse_yaml_kubeconfig(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The first value of each of `keys` in a YAML kubeconfig, read line by line."""
    found = {}
    for key in keys:
        match = re.search(rf"^\s*{re.escape(key)}:\s*['\"]?([^'\"\s]+)", text, re.M)
        if match:
            found[key] = match.group(1)
    if "server" not in found:
        raise ValueError("no server in the kubeconfig")
    return found


def server_from_kubeconfig(path: str) -> Server:
    with open(path) as handle:
        config = parse_kubeconfig(handle.read())
    base = os.path.dirname(os.path.abspath(path))

    def pem(key: str) -> str | None:
        if f"{key}-data" in config:
            return base64.b64decode(config[f"{key}-data"]).decode()
        if key in config:
            with open(os.path.join(base, config[key])) as handle:
                return handle.read()
        return None

    url = urllib.parse.urlsplit(config["server"])
    context = None
    if url.scheme == "https":
        context = ssl.create_default_context(cadata=pem("certificate-authority"))
        cert, key = pem("client-certificate"), pem("client-key")
        if cert and key:
            # load_cert_chain only reads files: write them to a private folder for a moment.
            with tempfile.TemporaryDirectory(prefix="volume-agent-") as private:  # mode 0700
                cert_file, key_file = os.path.join(private, "client.crt"), os.path.join(private, "client.key")
                for file, content in ((cert_file, cert), (key_file, key)):
                    with open(os.open(file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
                        handle.write(content)
                context.load_cert_chain(cert_file, key_file)
    port = url.port or (443 if url.scheme == "https" else 80)
    return Server(host=url.hostname or "127.0.0.1", port=port, context=context, token=config.get("token"))


class Gone(Exception):
    """The resourceVersion we watch from is too old (410): relist."""


class ApiError(Exception):
    pass


PV_PATH = "/api/v1/persistentvolumes"


def list_objects(server: Server, path: str = PV_PATH) -> tuple[list[Json], str]:
    """Every object of a collection (PersistentVolumes unless told), page by page, and the list's resourceVersion."""
    items: list[Json] = []
    token = ""
    while True:
        query = {"limit": str(LIST_PAGE_SIZE)}
        if token:
            query["continue"] = token
        connection = server.connect(timeout=60)
        try:
            connection.request("GET", f"{path}?{urllib.parse.urlencode(query)}", headers=server.headers())
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise ApiError(f"list {path}: HTTP {response.status}: {body[:300]!r}")
        page = json.loads(body)
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items, page["metadata"]["resourceVersion"]


def watch_objects(server: Server, resource_version: str, path: str = PV_PATH) -> Iterator[Json]:
    """The watch events of a collection after resource_version, until the server ends the watch."""
    query = urllib.parse.urlencode(
        {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS),
        }
    )
    connection = server.connect(timeout=WATCH_TIMEOUT_SECONDS + SOCKET_SLACK_SECONDS)
    try:
        connection.request("GET", f"{path}?{query}", headers=server.headers())
        response = connection.getresponse()
        if response.status == 410:
            raise Gone(f"HTTP 410 for resourceVersion {resource_version}")
        if response.status != 200:
            raise ApiError(f"watch {path}: HTTP {response.status}: {response.read()[:300]!r}")
        # One JSON event per line of the chunked body; http.client undoes the chunking.
        while line := response.readline():
            if line.strip():
                yield json.loads(line)
    finally:
        connection.close()


# ---------------------------------------------------------------- the agent


class Stop(Exception):
    """SIGTERM or SIGINT arrived."""


class Agent:
    def __init__(self, server: Server, volume_dir: str) -> None:
        self.server = server
        self.volume_dir = volume_dir
        self.pvs: dict[str, Json] = {}  # name -> PersistentVolume, as last seen

    def resync(self) -> str:
        """List every PV and make the folders match; return the resourceVersion to watch from."""
        items, resource_version = list_objects(self.server)
        self.pvs = {pv["metadata"]["name"]: pv for pv in items}
        existing = existing_folders(self.volume_dir)
        apply(
            self.volume_dir,
            folders_to_create(items, existing, self.volume_dir),
            folders_to_remove(items, existing, self.volume_dir),
        )
        return resource_version

    def handle(self, event: Json) -> str | None:
        """Act on one watch event; return its resourceVersion (None for one that carries none)."""
        kind, pv = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if pv.get("code") == 410:
                raise Gone(pv.get("message", "410 Gone"))
            raise ApiError(f"watch error: {pv.get('message', pv)}")
        name = (pv.get("metadata") or {}).get("name")
        if kind in ("ADDED", "MODIFIED") and name:
            self.pvs[name] = pv
            folder = volume_folder(pv, self.volume_dir)
            if folder is not None:
                apply(
                    self.volume_dir,
                    folders_to_create([pv], folder_exists(self.volume_dir, folder), self.volume_dir),
                    [],
                )
        elif kind == "DELETED" and name:
            self.pvs.pop(name, None)
            folder = volume_folder(pv, self.volume_dir)
            if folder is not None:
                # Another PV may name the same folder: then it stays.
                apply(
                    self.volume_dir,
                    [],
                    folders_to_remove(self.pvs.values(), folder_exists(self.volume_dir, folder), self.volume_dir),
                )
        return (pv.get("metadata") or {}).get("resourceVersion")

    def run(self) -> None:
        failures = 0
        resource_version = None
        while True:
            try:
                if resource_version is None:
                    resource_version = self.resync()
                    log(f"listed {len(self.pvs)} PersistentVolumes; watching from resourceVersion {resource_version}")
                started = time.monotonic()
                for event in watch_objects(self.server, resource_version):
                    resource_version = self.handle(event) or resource_version
                    failures = 0
                # The server ended the watch (timeoutSeconds): watch again from where we were,
                # but not in a tight loop if it keeps ending watches at once (shutting down).
                if time.monotonic() - started < 1:
                    time.sleep(1)
            except Gone as error:
                log(f"relisting: {error}")
                resource_version = None
            except (OSError, http.client.HTTPException, ApiError, ValueError, KeyError) as error:
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log(f"API error ({type(error).__name__}: {error}); relisting in {delay}s")
                resource_version = None
                time.sleep(delay)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volume-dir", required=True)
    args = parser.parse_args(argv)

    def stop(signum: int, _frame: FrameType | None) -> NoReturn:
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    volume_dir = os.path.abspath(args.volume_dir)
    try:
        os.makedirs(volume_dir, exist_ok=True)
        agent = Agent(server_from_kubeconfig(args.kubeconfig), volume_dir)
        log(f"volume agent started: folders under {volume_dir}, API server {agent.server.host}:{agent.server.port}")
        agent.run()
    except Stop as reason:
        log(f"stopping ({reason})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
