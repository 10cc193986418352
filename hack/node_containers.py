"""The real nodes' container runtime: the registry and the images pushed to it, and one containerd per node,
which pulls from it; the nodes' cgroup roots; and, for a lost node and for `down`, the containers' processes,
mounts and cgroups, found and removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from harness import CACHE_DIR, HACK_DIR, PORT_BASE, STATE_DIR, http_ok, log, run, running_pid, start, wait_until
from node_layout import HOST_IP, RUN_DIR, RealNode
from node_network import CNI_BIN_DIR

REGISTRY = f"127.0.0.1:{PORT_BASE}"  # the host's name for it, in every image reference
# The same store, read-only, where the nodes' containerd reach it (their loopback is their own).
NODES_REGISTRY = f"{HOST_IP}:{PORT_BASE}"
REGISTRY_DIR = CACHE_DIR / "registry"  # outlives `down`: images are pushed once
CGROUP_DIR = Path("/sys/fs/cgroup")
# A container's cgroup (any controller, v1) under a node's kubelet: 4:memory:/mydb-node-2/kubepods/...
NODE_CGROUP = re.compile(r":/mydb-node-(\d+)/kubepods")


# --------------------------------------------------------------- registry


def registry_config(name: str, address: str, *, read_only: bool) -> Path:
    config = STATE_DIR / f"{name}.yaml"
    storage = {"filesystem": {"rootdirectory": str(REGISTRY_DIR)}, "delete": {"enabled": True}}
    if read_only:
        storage["maintenance"] = {"readonly": {"enabled": True}}
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "log": {"level": "warn", "accesslog": {"disabled": True}},
                "storage": storage,
                "http": {"addr": address},
            }
        )
        + "\n"
    )
    return config


def start_registry(bins: Path) -> None:
    """The registry on loopback, where the host pushes and pulls, and the same store served read-only on the
    host's bridge address, where the nodes pull (a registry listens on one address)."""
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    start("registry", [str(bins / "registry"), "serve", str(registry_config("registry", REGISTRY, read_only=False))])
    config = registry_config("registry-nodes", NODES_REGISTRY, read_only=True)
    start("registry-nodes", [str(bins / "registry"), "serve", str(config)])
    wait_until("registry", lambda: http_ok(f"http://{REGISTRY}/v2/"), process="registry")
    wait_until("registry for the nodes", lambda: http_ok(f"http://{NODES_REGISTRY}/v2/"), process="registry-nodes")


def push_images() -> dict[str, str]:
    """Build what is missing (cached), push it to the registry, and return KEY -> image reference."""
    subprocess.run(["bash", str(HACK_DIR / "images.sh"), "push", REGISTRY], check=True)
    listed = run("bash", str(HACK_DIR / "images.sh"), "list").stdout
    return {key: f"{REGISTRY}/{ref}" for key, ref in (line.split("=", 1) for line in listed.split() if "=" in line)}


# ------------------------------------------------------------- containerd


def write_containerd_config(node: RealNode, pause_image: str, cni_conf_dir: Path) -> Path:
    hosts = node.state_dir / "containerd" / "certs.d" / "_default"
    hosts.mkdir(parents=True, exist_ok=True)
    # Every registry name, docker.io included, resolves to the nodes' registry.
    # containerd 1.6 cannot parse a hosts.toml without a [host] table, and
    # then silently falls back to the registry's own address:
    # tests/e2e/test_real_node.py proves this one is read.
    server = f"http://{NODES_REGISTRY}"
    (hosts / "hosts.toml").write_text(
        f'server = "{server}"\n\n[host."{server}"]\n  capabilities = ["pull", "resolve"]\n'
    )
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    config = node.state_dir / "containerd.toml"
    config.write_text(f"""version = 2
root = "{node.containerd_root}"
state = "{node.run_dir / "containerd"}"
[grpc]
  address = "{node.containerd_socket}"
[ttrpc]
  address = "{node.run_dir / "containerd.ttrpc.sock"}"
[{cri}]
  sandbox_image = "{pause_image}"
  # This sandbox lacks CAP_SYS_RESOURCE: the runtime cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  # crun, not runc: every exec probe (pg_isready each second in every database pod) starts the
  # runtime twice, and runc's Go start-up made that a sixth of a busy test run's CPU (docs/real-node.md).
  BinaryName = "{shutil.which("crun") or "crun"}"
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{cni_conf_dir}"
[{cri}.registry]
  config_path = "{node.state_dir / "containerd" / "certs.d"}"
""")
    return config


def free_unified_controllers() -> None:
    """On a cgroup v1 host whose cgroup2 mount still offers a controller (hugetlb here), crun refuses to run
    ("cgroups in hybrid mode not supported"): give each such controller a v1 hierarchy of its own, as the
    others have. The mounts stay after `down`, like the kernel modules the node loads."""
    unified = CGROUP_DIR / "unified" / "cgroup.controllers"
    if not unified.exists() or not (CGROUP_DIR / "memory").is_dir():
        return
    for controller in unified.read_text().split():
        target = CGROUP_DIR / controller
        target.mkdir(exist_ok=True)
        run("mount", "-t", "cgroup", "-o", controller, "cgroup", str(target))
        log(f"mounted the {controller} cgroup controller at {target} (v1), as crun needs")


def v1_controllers() -> list[Path]:
    """The cgroup v1 hierarchies (each with its own cgroup.procs), not the unified one."""
    return [
        path for path in sorted(CGROUP_DIR.iterdir()) if path.name != "unified" and (path / "cgroup.procs").exists()
    ]


def make_cgroup_root(node: RealNode) -> None:
    """The node kubelet's --cgroup-root in every hierarchy (the kubelet refuses a root that is missing in one);
    a new cpuset starts empty and takes no process until it has CPUs and memory nodes: its parent's."""
    for controller in v1_controllers():
        folder = controller / node.cgroup_root.lstrip("/")
        folder.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (folder / name).exists() and not (folder / name).read_text().strip():
                (folder / name).write_text((controller / name).read_text())


def start_containerd(node: RealNode, config: Path) -> None:
    node.run_dir.mkdir(parents=True, exist_ok=True)
    name = node.component("containerd")
    start(name, node.in_netns("containerd", "--config", str(config)))
    wait_until(name, lambda: ctr(node, "version", check=False).returncode == 0, process=name)
    forget_stale_images(node)


def ctr(node: RealNode, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """containerd's own client, in the namespace the kubelet's images and containers live in."""
    return run("ctr", "--address", str(node.containerd_socket), "--namespace", "k8s.io", *args, check=check)


def is_tag(name: str) -> bool:
    """host/repository:tag, not host/repository@digest nor the image id sha256:..."""
    return "@" not in name and not name.startswith("sha256:") and ":" in name.rsplit("/", 1)[-1]


def stale_images(stored: dict[str, str], registry: dict[str, str | None]) -> list[str]:
    """Names to forget from STORED (image name -> manifest digest): every tag whose digest the registry no longer
    serves (an image rebuilt under its tag, such as the operator's), and the other names (repository@digest,
    the id) of an image no kept tag names. REGISTRY: tag -> the digest the registry has, None if it has none."""
    stale = {name for name, digest in stored.items() if is_tag(name) and registry.get(name) != digest}
    kept = {digest for name, digest in stored.items() if is_tag(name) and name not in stale}
    gone = {stored[name] for name in stale} - kept
    return sorted(stale | {name for name, digest in stored.items() if not is_tag(name) and digest in gone})


MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


def registry_digest(name: str) -> str | None:
    """The manifest digest the loopback registry serves for NAME (any registry host resolves to it), or None."""
    repository, tag = name.split("/", 1)[1].rsplit(":", 1)
    url = f"http://{REGISTRY}/v2/{repository}/manifests/{tag}"
    request = urllib.request.Request(url, method="HEAD", headers={"Accept": ", ".join(MANIFEST_TYPES)})
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as response:
            digest: str | None = response.headers.get("Docker-Content-Digest")
            return digest
    except OSError:  # not there (HTTP 404), or no answer: pulled again either way
        return None


def forget_stale_images(node: RealNode) -> None:
    """Before the kubelet looks: an image whose tag now names other content is forgotten, so it is pulled again."""
    rows = (line.split() for line in ctr(node, "images", "list").stdout.splitlines()[1:])  # REF TYPE DIGEST ...
    stored = {row[0]: row[2] for row in rows if len(row) >= 3}
    names = stale_images(stored, {name: registry_digest(name) for name in stored if is_tag(name)})
    if names:
        ctr(node, "images", "remove", *names)
        log(f"{node.name} forgot {len(names)} image names whose registry content changed: {', '.join(names)}")


def forget_containers(node: RealNode) -> None:
    """Remove every container's record (the images stay), once their processes are gone. A containerd that no
    longer runs or answers (killed, or the node already down) leaves them to the next kubelet, which removes the
    containers of pods it does not know. Not running: no `ctr` at all, whose dial waits 10 s for a socket that
    nobody serves (the `down` after the tests' own took 10 s so)."""
    if running_pid(node.component("containerd")) is None or ctr(node, "version", check=False).returncode != 0:
        return
    ids = ctr(node, "containers", "list", "--quiet").stdout.split()
    if ids and ctr(node, "containers", "remove", *ids, check=False).returncode != 0:
        left = ctr(node, "containers", "list", "--quiet").stdout
        log(f"could not remove every container of {node.name}'s containerd: {left}")


# ------------------------------------------------------- containers' processes


def container_node(cgroups: str) -> int | None:
    """The index of the real node whose kubelet made the process's cgroup (/proc/PID/cgroup's text), if any."""
    found = NODE_CGROUP.search(cgroups)
    return int(found.group(1)) if found else None


def our_processes(node: RealNode | None = None, shims: bool = True) -> list[int]:
    """Containers of NODE (of every real node if None) and, with SHIMS, their shims: found by cgroup and by
    containerd address, not by pid file."""
    socket = str(node.containerd_socket).encode() if node else str(RUN_DIR).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cgroups = (proc / "cgroup").read_text()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        shim = bool(args) and args[0].endswith(b"containerd-shim-runc-v2") and any(socket in arg for arg in args)
        index = container_node(cgroups)
        if (shims and shim) or (index is not None and (node is None or index == node.index)):
            found.append(int(proc.name))
    return found


def terminate_containers(grace: float, node: RealNode | None = None) -> None:
    """Ask every container process of NODE (of every node if None) to end (SIGTERM: PostgreSQL's postmaster then
    shuts down cleanly once its backends, which get it too, are gone), and wait up to GRACE seconds for them. The
    shims stay until the containers are gone: they carry the containers' output to the logs, and a shim that
    ends takes its container with it. Those still running at the end are named: `kill_containers` ends them."""
    deadline = time.monotonic() + grace
    # The pods' pause processes last: in a pod that shares one process namespace (the database's) the pause
    # process is its init, and the kernel kills every other process of it the moment it ends.
    for sandboxes in (False, True):
        for pid in our_processes(node, shims=False):
            if is_pause(pid) == sandboxes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        while (running := [p for p in our_processes(node, shims=False) if sandboxes or not is_pause(p)]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
    running = our_processes(node, shims=False)
    if running:
        log(f"still running {grace:.0f} s after SIGTERM, to be killed: {'; '.join(map(describe, running))}")


def is_pause(pid: int) -> bool:
    """The process is a pod's sandbox (the pause image's /pause)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == b"/pause"
    except OSError:
        return False


def describe(pid: int) -> str:
    """PID, its state (T: stopped) and its command line, for a log line."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} [{state}] {args[:120]}"


def signal_containers(node: RealNode, signum: int) -> None:
    """SIGNUM to every container process of NODE and their shims (SIGSTOP freezes them, SIGCONT thaws)."""
    for pid in our_processes(node):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def kill_containers(node: RealNode | None = None) -> None:
    for _ in range(50):
        pids = our_processes(node)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    raise SystemExit(f"container processes survive SIGKILL: {our_processes(node)}")


# -------------------------------------------------------------------- down


def our_mounts() -> list[str]:
    """Mount points of the nodes (container rootfs, kubelet volumes, netns), deepest first."""
    roots = (str(RUN_DIR), str(STATE_DIR), str(CACHE_DIR / f"containerd-{PORT_BASE}-node-"))
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(roots):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_all() -> None:
    for point in our_mounts():
        if run("umount", point, check=False).returncode != 0:
            run("umount", "-l", point, check=False)


def our_cgroups() -> list[Path]:
    """The kubelets' cgroup roots and everything under them, in every hierarchy, deepest first."""
    tops = [top for controller in v1_controllers() for top in controller.glob("mydb-node-*")]
    tops += list(CGROUP_DIR.glob("*/kubepods*"))  # a kubelet of the one-node layout, with no cgroup root
    folders = [p for top in tops for p in [top, *top.rglob("*")] if p.is_dir()]
    return sorted(folders, key=lambda p: len(p.parts), reverse=True)


def remove_cgroups() -> None:
    """Every folder of our_cgroups() (a cgroup goes once empty)."""
    for folder in our_cgroups():
        with contextlib.suppress(OSError):
            folder.rmdir()
