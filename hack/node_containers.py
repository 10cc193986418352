"""The real node's container runtime: the loopback registry and the images
pushed to it, and containerd, which pulls from it; and, for `down`, the
containers' processes, mounts and cgroups, found and removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from harness import CACHE_DIR, HACK_DIR, PORT_BASE, STATE_DIR, http_ok, log, run, running_pid, start, wait_until
from node_network import CNI_BIN_DIR

REGISTRY = f"127.0.0.1:{PORT_BASE}"
REGISTRY_DIR = CACHE_DIR / "registry"  # outlives `down`: images are pushed once
# containerd's store outlives `down` too, so images are unpacked once: a new cluster's first pods waited 12 s for
# postgres:15 and the major upgrade 21 s for 17. One per port base (its images are named by the registry's port).
CONTAINERD_ROOT = CACHE_DIR / f"containerd-{PORT_BASE}"
# Unix sockets have a 108-byte path limit: keep them out of a deep checkout.
RUN_DIR = Path(f"/run/mydb-cluster-{PORT_BASE}")
CONTAINERD_SOCKET = RUN_DIR / "containerd.sock"


# --------------------------------------------------------------- registry


def start_registry(bins: Path) -> None:
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    config = STATE_DIR / "registry.yaml"
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "log": {"level": "warn", "accesslog": {"disabled": True}},
                "storage": {"filesystem": {"rootdirectory": str(REGISTRY_DIR)}, "delete": {"enabled": True}},
                "http": {"addr": REGISTRY},
            }
        )
        + "\n"
    )
    start("registry", [str(bins / "registry"), "serve", str(config)])
    wait_until("registry", lambda: http_ok(f"http://{REGISTRY}/v2/"), process="registry")


def push_images() -> dict[str, str]:
    """Build what is missing (cached), push it to the registry, and return KEY -> image reference."""
    subprocess.run(["bash", str(HACK_DIR / "images.sh"), "push", REGISTRY], check=True)
    listed = run("bash", str(HACK_DIR / "images.sh"), "list").stdout
    return {key: f"{REGISTRY}/{ref}" for key, ref in (line.split("=", 1) for line in listed.split() if "=" in line)}


# ------------------------------------------------------------- containerd


def write_containerd_config(pause_image: str, cni_conf_dir: Path) -> Path:
    hosts = STATE_DIR / "containerd" / "certs.d" / "_default"
    hosts.mkdir(parents=True, exist_ok=True)
    # Every registry name, docker.io included, resolves to the loopback registry.
    # containerd 1.6 cannot parse a hosts.toml without a [host] table, and
    # then silently falls back to the registry's own address:
    # tests/e2e/test_real_node.py proves this one is read.
    (hosts / "hosts.toml").write_text(
        f'server = "http://{REGISTRY}"\n\n[host."http://{REGISTRY}"]\n  capabilities = ["pull", "resolve"]\n'
    )
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    config = STATE_DIR / "containerd.toml"
    config.write_text(f"""version = 2
root = "{CONTAINERD_ROOT}"
state = "{RUN_DIR / "containerd"}"
[grpc]
  address = "{CONTAINERD_SOCKET}"
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
  config_path = "{STATE_DIR / "containerd" / "certs.d"}"
""")
    return config


def free_unified_controllers() -> None:
    """On a cgroup v1 host whose cgroup2 mount still offers a controller (hugetlb here), crun refuses to run
    ("cgroups in hybrid mode not supported"): give each such controller a v1 hierarchy of its own, as the
    others have. The mounts stay after `down`, like the kernel modules the node loads."""
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    if not unified.exists() or not Path("/sys/fs/cgroup/memory").is_dir():
        return
    for controller in unified.read_text().split():
        target = Path("/sys/fs/cgroup") / controller
        target.mkdir(exist_ok=True)
        run("mount", "-t", "cgroup", "-o", controller, "cgroup", str(target))
        log(f"mounted the {controller} cgroup controller at {target} (v1), as crun needs")


def start_containerd(config: Path) -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    start("containerd", ["containerd", "--config", str(config)])
    wait_until("containerd", lambda: ctr("version", check=False).returncode == 0, process="containerd")
    forget_stale_images()


def ctr(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """containerd's own client, in the namespace the kubelet's images and containers live in."""
    return run("ctr", "--address", str(CONTAINERD_SOCKET), "--namespace", "k8s.io", *args, check=check)


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


def forget_stale_images() -> None:
    """Before the kubelet looks: an image whose tag now names other content is forgotten, so it is pulled again."""
    rows = (line.split() for line in ctr("images", "list").stdout.splitlines()[1:])  # REF TYPE DIGEST SIZE ...
    stored = {row[0]: row[2] for row in rows if len(row) >= 3}
    names = stale_images(stored, {name: registry_digest(name) for name in stored if is_tag(name)})
    if names:
        ctr("images", "remove", *names)
        log(f"forgot {len(names)} image names whose registry content changed: {', '.join(names)}")


def forget_containers() -> None:
    """Remove every container's record (the images stay), once their processes are gone. A containerd that no
    longer runs or answers (killed, or the node already down) leaves them to the next kubelet, which removes the
    containers of pods it does not know. Not running: no `ctr` at all, whose dial waits 10 s for a socket that
    nobody serves (the `down` after the tests' own took 10 s so)."""
    if running_pid("containerd") is None or ctr("version", check=False).returncode != 0:
        return
    ids = ctr("containers", "list", "--quiet").stdout.split()
    if ids and ctr("containers", "remove", *ids, check=False).returncode != 0:
        log(f"could not remove every container of containerd's store: {ctr('containers', 'list', '--quiet').stdout}")


# -------------------------------------------------------------------- down


def our_processes(shims: bool = True) -> list[int]:
    """Containers of the node and (with SHIMS) their shims: found by cgroup and by containerd address, not by pid
    file."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cgroups = (proc / "cgroup").read_text()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        shim = bool(args) and args[0].endswith(b"containerd-shim-runc-v2") and str(CONTAINERD_SOCKET).encode() in args
        if (shims and shim) or "/kubepods" in cgroups:
            found.append(int(proc.name))
    return found


def terminate_containers(grace: float) -> None:
    """Ask every container process to end (SIGTERM: PostgreSQL's postmaster then shuts down cleanly once its
    backends, which get it too, are gone), and wait up to GRACE seconds for them. The shims stay until the
    containers are gone: they carry the containers' output to the logs, and a shim that ends takes its
    container with it. Those still running at the end are named: `kill_containers` ends them."""
    deadline = time.monotonic() + grace
    # The pods' pause processes last: in a pod that shares one process namespace (the database's) the pause
    # process is its init, and the kernel kills every other process of it the moment it ends.
    for sandboxes in (False, True):
        for pid in our_processes(shims=False):
            if is_pause(pid) == sandboxes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        while (running := [p for p in our_processes(shims=False) if sandboxes or not is_pause(p)]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
    running = our_processes(shims=False)
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


def kill_containers() -> None:
    for _ in range(50):
        pids = our_processes()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    raise SystemExit(f"container processes survive SIGKILL: {our_processes()}")


def our_mounts() -> list[str]:
    """Mount points of the node (container rootfs, kubelet volumes, netns), deepest first."""
    roots = (str(RUN_DIR), str(STATE_DIR), str(CONTAINERD_ROOT))
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


def remove_cgroups() -> None:
    """The kubelet's kubepods hierarchy in every controller, deepest first (a cgroup goes once empty)."""
    folders = [p for top in Path("/sys/fs/cgroup").glob("*/kubepods*") for p in [top, *top.rglob("*")] if p.is_dir()]
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()
