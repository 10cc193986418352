"""One real node beside the kwok nodes: containerd + runc, CNI, kubelet,
kube-proxy, kube-router's NetworkPolicy firewall, CoreDNS and a loopback OCI
registry, run as processes on this machine (root needed).

The network follows one rule: no packet for a pod or Service address ever
leaves this machine.
- Pods and Services take their addresses from 198.18.0.0/15, for which the
  host has an unreachable route; the pod bridge's own /24 is more specific.
- Pods route only that /15 (no default route), the bridge does no NAT, and a
  guard in the mangle table drops anything forwarded from the bridge to
  another interface (or back), whatever kube-proxy programs.
- CoreDNS answers cluster.local and the reverse zones of the /15 only:
  every other name is REFUSED, nothing is forwarded upstream.
- containerd resolves every registry name to the loopback registry.

`down` removes all of it: processes (containers included), mounts, network
namespaces, links, iptables chains and ipsets, the route, and the sysctls it
changed.

The parts live beside this file, one concern each: node_network.py (the
bridge, the route, the guard, CNI), node_containers.py (the registry,
containerd, and the containers' processes, mounts and cgroups) and
node_kubelet.py (the node's certificates, CoreDNS, kubelet, kube-proxy),
node_policies.py (the NetworkPolicy engine) and local_volumes.py (XFS volumes
of the StorageClass local-xfs). This
module puts them together (up, down, leftovers), knows which cluster owns the
node, and checks that the host can run it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypedDict

import local_volumes
import node_policies
from harness import CLUSTER_DIR, PORT_BASE, SAFE_RANGE, STATE_DIR, log, running_pid, start, stop
from node_containers import REGISTRY as REGISTRY  # `as`: hack/cluster.py reads it as node.REGISTRY
from node_containers import (
    RUN_DIR,
    forget_containers,
    free_unified_controllers,
    kill_containers,
    our_mounts,
    our_processes,
    push_images,
    remove_cgroups,
    start_containerd,
    start_registry,
    terminate_containers,
    unmount_all,
    write_containerd_config,
)
from node_kubelet import NODE_LABEL as NODE_LABEL  # node.NODE_LABEL, as REGISTRY
from node_kubelet import NODE_NAME as NODE_NAME  # node.NODE_NAME, as REGISTRY
from node_kubelet import coredns_rbac, make_node_pki, start_coredns, start_kube_proxy, start_kubelet
from node_network import (
    CNI_BIN_DIR,
    CNI_PLUGINS,
    cni_namespaces,
    our_chains,
    our_links,
    remove_network,
    route_present,
    setup_network,
    write_cni_config,
)
from node_network import NODE_IP as NODE_IP  # node.NODE_IP, as REGISTRY

COMPONENTS = ["registry", "containerd", "local-volumes", "coredns", "kubelet", "kube-proxy", "kube-router"]
LOCAL_VOLUME_DIR = STATE_DIR / "local-volumes"  # the XFS files of the StorageClass local-xfs, and their mounts
# What the node needs from the host, and the Debian package that brings it.
HOST_COMMANDS = {
    "ip": "iproute2",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "conntrack": "conntrack",
    "ipset": "ipset",
    "containerd": "containerd",
    "crun": "crun",
    "runc": "runc",
    "ctr": "containerd",
    "mkfs.xfs": "xfsprogs",
    "xfs_growfs": "xfsprogs",
    "losetup": "mount",
}
# The bridge, the pod addresses, kube-proxy's chains and CoreDNS's address are
# the host's, so one cluster at a time runs the real node. This file names it;
# in /run, it goes with a reboot as the network state does.
OWNER_FILE = Path("/run/mydb-real-node.json")


class Owner(TypedDict):
    """What OWNER_FILE says: the cluster that last started the real node."""

    cluster_dir: str
    port_base: int


class Kubectl(Protocol):
    """The admin kubectl: kubectl(*args, stdin=...) returns its output."""

    def __call__(self, *args: str, stdin: str | None = None) -> str: ...


def enabled() -> bool:
    """MYDB_REAL_NODE=0 runs the control plane with kwok nodes only (a second cluster beside the first)."""
    return os.environ.get("MYDB_REAL_NODE", "1") != "0"


# -------------------------------------------------------------- ownership


def owner() -> Owner | None:
    """{"cluster_dir": ..., "port_base": ...} of the cluster that last started the real node, if any."""
    try:
        found: Owner = json.loads(OWNER_FILE.read_text())
        return found
    except (OSError, ValueError):
        return None


def running_elsewhere() -> Owner | None:
    """The owner, when it is another cluster whose kubelet is still running: this one must not touch the node."""
    found = owner()
    if not found or Path(found["cluster_dir"]).resolve() == CLUSTER_DIR.resolve():
        return None
    return found if running_pid("kubelet", Path(found["cluster_dir"]) / "state" / "pids") else None


def claim() -> None:
    OWNER_FILE.write_text(json.dumps({"cluster_dir": str(CLUSTER_DIR.resolve()), "port_base": PORT_BASE}) + "\n")


def release() -> None:
    if not running_elsewhere():
        OWNER_FILE.unlink(missing_ok=True)


# ------------------------------------------------------------ host checks


def host_problems() -> list[str]:
    """What this host lacks for a real node, each with what to do about it."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (network namespaces, mounts, iptables)")
    for command, package in HOST_COMMANDS.items():
        if not shutil.which(command):
            problems.append(f"`{command}` is missing: apt-get install {package} (hack/install-node-packages.sh)")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).exists():
            problems.append(
                f"CNI plugin {CNI_BIN_DIR / plugin} is missing: apt-get install containernetworking-plugins"
            )
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        problems.append(
            "no memory cgroup at /sys/fs/cgroup/memory (v1) nor a cgroup v2 root: the kubelet cannot run pods"
        )
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        problems.append(
            "br_netfilter is not loaded (modprobe br_netfilter): Services between pods of the bridge need it"
        )
    return problems


def prepare_host(bins: Path) -> Path:
    """The real node's part that needs no API server (its network, registry, images and containerd):
    hack/cluster.py does it while the control plane starts. Returns the network policy engine for `join`."""
    problems = host_problems()
    if problems:
        raise SystemExit(
            "this host cannot run the real node (MYDB_REAL_NODE=0 runs without it):\n- " + "\n- ".join(problems)
        )
    engine = node_policies.binary()
    claim()
    make_node_pki()
    node_policies.make_pki()
    setup_network()
    start_registry(bins)
    images = push_images()
    free_unified_controllers()
    start_containerd(write_containerd_config(images["PAUSE_IMAGE"], write_cni_config()))
    return engine


def join(engine: Path, bins: Path, kubectl: Kubectl, kubeconfig_for: Callable[[str], Path]) -> None:
    """The rest, on the running control plane: volumes, DNS, the kubelet, Services and NetworkPolicies.

    kubectl(*args, stdin=...) runs the admin kubectl; kubeconfig_for(name)
    writes a kubeconfig for PKI_DIR/name.{crt,key} and returns its path."""
    start_local_volumes()
    kubectl("apply", "-f", "-", stdin=json.dumps(coredns_rbac()))
    start_coredns(bins, kubeconfig_for("coredns"))
    start_kubelet(bins, kubeconfig_for("kubelet"))
    start_kube_proxy(bins, kubeconfig_for("kube-proxy"))
    kubectl("apply", "-f", "-", stdin=json.dumps(node_policies.rbac()))
    node_policies.start_network_policies(engine, kubeconfig_for("kube-router"))
    kubectl("wait", "--for=condition=Ready", f"node/{NODE_NAME}", "--timeout=120s")
    log(f"real node {NODE_NAME} is Ready (pods need the toleration {NODE_LABEL}=true:NoSchedule)")


def start_local_volumes() -> None:
    """The real node's volumes: mounted before the kubelet starts (no pod may see an empty folder), then served."""
    local_volumes.mount_existing(str(LOCAL_VOLUME_DIR))
    start(
        "local-volumes",
        [
            sys.executable,
            str(Path(local_volumes.__file__).resolve()),
            f"--kubeconfig={STATE_DIR / 'volume-agent.kubeconfig'}",
            f"--volume-dir={LOCAL_VOLUME_DIR}",
            f"--node={NODE_NAME}",
        ],
    )


# -------------------------------------------------------------------- down


def down(grace: float = 0, pause: bool = False) -> None:
    """Remove everything `up` made on this host but the images; safe to run on a half-started or half-dead node.
    GRACE: seconds the containers get to end on SIGTERM before they are killed. PAUSE: `stop`, which `up`
    resumes: containerd keeps the containers' records (their data is on the volumes either way)."""
    stop("kubelet")
    if grace:
        terminate_containers(grace)
    kill_containers()
    if not pause:
        forget_containers()
    for name in ("kube-router", "kube-proxy", "coredns", "local-volumes", "containerd", "registry"):
        stop(name)
    unmount_all()  # the pods' mounts, then the volumes' (deepest first): `-o loop` devices go with them
    remove_network()
    node_policies.remove_sets()
    node_policies.remove_cpu_cap()
    remove_cgroups()
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    release()


def leftovers() -> list[str]:
    """Everything of the node still on this host: empty after `down`."""
    found = [f"process {name} (pid {running_pid(name)})" for name in COMPONENTS if running_pid(name)]
    found += [f"container process {pid}" for pid in our_processes()]
    found += [f"mount {point}" for point in our_mounts()]
    found += [f"loop device {device}" for device in local_volumes.our_loop_devices(str(STATE_DIR))]
    found += [f"network namespace {name}" for name in cni_namespaces()]
    found += [f"link {link}" for link in our_links()]
    found += [f"iptables {table} chain {chain}" for table, chains in our_chains().items() for chain in chains]
    found += [f"ipset {name}" for name in node_policies.our_sets()]
    found += [f"cgroup {group}" for group in node_policies.CPU_GROUPS if group.is_dir()]
    if route_present():
        found.append(f"route unreachable {SAFE_RANGE}")
    if RUN_DIR.exists():
        found.append(f"folder {RUN_DIR}")
    if owner():
        found.append(f"file {OWNER_FILE}")
    return found
