"""Real nodes beside the kwok nodes (three by default, MYDB_REAL_NODES): each a network namespace of this
machine with its own containerd + runc, CNI bridge, kubelet, kube-proxy and kube-router's NetworkPolicy
firewall; CoreDNS, the registry and the API server on the host, which every node reaches over one bridge.

The network follows one rule: no packet for a pod or Service address ever
leaves this machine.
- Pods and Services take their addresses from 198.18.0.0/15, for which the
  host and every node have an unreachable route; the nodes' and their pods'
  own /24s are more specific (hack/node_layout.py lists them).
- Pods route only that /15 (no default route), nothing does NAT, and guards in
  the mangle tables drop anything forwarded out of the range (in a node) or
  from the nodes' bridge to another interface (on the host), whatever
  kube-proxy programs.
- CoreDNS answers cluster.local and the reverse zones of the /15 only:
  every other name is REFUSED, nothing is forwarded upstream.
- containerd resolves every registry name to the local registry.

Each node can be lost (a power cut: its processes and containers killed, its
link down), frozen (SIGSTOP of them all), cut off (its link down: its pods
run on, reaching only each other) or drained, and brought back (`fault`).

`down` removes all of it: processes (containers included), mounts, network
namespaces, links, iptables chains and ipsets, routes and cgroups.

The parts live beside this file, one concern each: node_layout.py (names,
addresses, folders), node_network.py (the bridges, routes, guards, CNI),
node_containers.py (the registry, containerd, and the containers' processes,
mounts and cgroups), node_kubelet.py (the nodes' certificates, CoreDNS,
kubelet, kube-proxy), node_policies.py (the NetworkPolicy engine) and
local_volumes.py (XFS volumes of the StorageClass local-xfs). This module puts
them together (up, down, faults, leftovers), knows which cluster owns the
nodes, and checks that the host can run them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Protocol, TypedDict

import local_volumes
import node_policies
from harness import CLUSTER_DIR, PORT_BASE, SAFE_RANGE, STATE_DIR, log, running_pid, start, stop
from node_containers import REGISTRY as REGISTRY  # `as`: hack/cluster.py reads it as node.REGISTRY
from node_containers import (
    forget_containers,
    free_unified_controllers,
    kill_containers,
    make_cgroup_root,
    our_cgroups,
    our_mounts,
    our_processes,
    push_images,
    remove_cgroups,
    signal_containers,
    start_containerd,
    start_registry,
    terminate_containers,
    unmount_all,
    write_containerd_config,
)
from node_kubelet import coredns_rbac, make_node_pki, start_coredns, start_kube_proxy, start_kubelet
from node_layout import HOST_IP as HOST_IP  # node.HOST_IP, as REGISTRY
from node_layout import NODE_LABEL as NODE_LABEL  # node.NODE_LABEL, as REGISTRY
from node_layout import RUN_DIR, RealNode
from node_layout import real_nodes as real_nodes  # node.real_nodes, as REGISTRY
from node_network import (
    CNI_BIN_DIR,
    CNI_PLUGINS,
    cni_namespaces,
    cut,
    mend,
    our_chains,
    our_links,
    our_netns,
    remove_network,
    route_present,
    setup_host_network,
    setup_node_network,
    write_cni_config,
)

HOST_COMPONENTS = ["registry", "registry-nodes", "local-volumes", "coredns"]
NODE_COMPONENTS = ["containerd", "kubelet", "kube-proxy", "kube-router"]  # one of each per node: kubelet-2
LOCAL_VOLUME_DIR = STATE_DIR / "local-volumes"  # the XFS files of the StorageClass local-xfs, and their mounts
FAULTS = ("lost", "frozen", "cut", "drained")
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
    "nsenter": "util-linux",
}
# The bridge, the namespaces, the addresses and CoreDNS's are the host's, so
# one cluster at a time runs the real nodes. This file names it;
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
    pids = Path(found["cluster_dir"]) / "state" / "pids"
    return found if any(running_pid(node.component("kubelet"), pids) for node in real_nodes()) else None


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
    """The real nodes' part that needs no API server (their network, the registry, images and containerd):
    hack/cluster.py does it while the control plane starts. Returns the network policy engine for `join`."""
    problems = host_problems()
    if problems:
        raise SystemExit(
            "this host cannot run the real nodes (MYDB_REAL_NODE=0 runs without them):\n- " + "\n- ".join(problems)
        )
    engine = node_policies.binary()
    nodes = real_nodes()
    claim()
    make_node_pki(nodes)
    node_policies.make_pki()
    setup_host_network()
    for node in nodes:
        node.state_dir.mkdir(parents=True, exist_ok=True)
        setup_node_network(node, nodes)
    start_registry(bins)
    images = push_images()
    free_unified_controllers()
    for node in nodes:
        make_cgroup_root(node)
        start_containerd(node, write_containerd_config(node, images["PAUSE_IMAGE"], write_cni_config(node)))
    return engine


class KubeconfigFor(Protocol):
    """kubeconfig_for(name, api_host): writes a kubeconfig for PKI_DIR/name.{crt,key} whose API server is at
    API_HOST, and returns its path."""

    def __call__(self, name: str, api_host: str = ...) -> Path: ...


def join(engine: Path, bins: Path, kubectl: Kubectl, kubeconfig_for: KubeconfigFor) -> None:
    """The rest, on the running control plane: volumes, DNS, then each node's kubelet, Services and
    NetworkPolicies. kubectl(*args, stdin=...) runs the admin kubectl."""
    nodes = real_nodes()
    start_local_volumes(nodes)
    kubectl("apply", "-f", "-", stdin=json.dumps(coredns_rbac()))
    start_coredns(bins, kubeconfig_for("coredns"))
    kubectl("apply", "-f", "-", stdin=json.dumps(node_policies.rbac()))
    # The nodes reach the API server on the host's bridge address.
    for name in ("kube-proxy", "kube-router"):
        kubeconfig_for(name, HOST_IP)
    for node in nodes:
        kubeconfig_for(node.component("kubelet"), HOST_IP)
        start_node(node, engine, bins)
    forget_other_nodes(kubectl, nodes)
    kubectl("wait", "--for=condition=Ready", *(f"node/{node.name}" for node in nodes), "--timeout=120s")
    names = ", ".join(node.name for node in nodes)
    log(f"real nodes {names} are Ready (pods need the toleration {NODE_LABEL}=true:NoSchedule)")


def forget_other_nodes(kubectl: Kubectl, nodes: list[RealNode]) -> None:
    """Real Nodes a kept state knows that no longer run (fewer MYDB_REAL_NODES, an older layout's names) go, with
    their pods: the scheduler would name them in every refusal, and their pods would wait for them for ever."""
    listed = kubectl("get", "nodes", "-l", f"{NODE_LABEL}=true", "-o", "name").split()
    gone = [name for name in listed if name.removeprefix("node/") not in {node.name for node in nodes}]
    if gone:
        kubectl("delete", *gone, "--wait=false")
        log(f"removed the Nodes no real node runs as any more: {', '.join(gone)}")


def start_node(node: RealNode, engine: Path, bins: Path) -> None:
    """NODE's kubelet, kube-proxy and kube-router (its containerd runs), with the kubeconfigs `join` wrote."""
    start_kubelet(node, bins, STATE_DIR / f"{node.component('kubelet')}.kubeconfig")
    start_kube_proxy(node, bins, STATE_DIR / "kube-proxy.kubeconfig")
    node_policies.start_network_policies(node, engine, STATE_DIR / "kube-router.kubeconfig")


def start_local_volumes(nodes: list[RealNode]) -> None:
    """The real nodes' volumes: mounted before the kubelets start (no pod may see an empty folder), then served."""
    local_volumes.mount_existing(str(LOCAL_VOLUME_DIR))
    start(
        "local-volumes",
        [
            sys.executable,
            str(Path(local_volumes.__file__).resolve()),
            f"--kubeconfig={STATE_DIR / 'volume-agent.kubeconfig'}",
            f"--volume-dir={LOCAL_VOLUME_DIR}",
            *(f"--node={node.name}" for node in nodes),
        ],
    )


def components() -> list[str]:
    """The processes the real nodes run (a lost node's are gone, and it is no less up)."""
    running = [node for node in real_nodes() if fault(node) != "lost"]
    return HOST_COMPONENTS + [node.component(name) for node in running for name in NODE_COMPONENTS]


# ------------------------------------------------------------------ faults


def node_processes(node: RealNode) -> list[int]:
    """NODE's containerd, kubelet, kube-proxy and kube-router, those running."""
    return [pid for name in NODE_COMPONENTS if (pid := running_pid(node.component(name)))]


def signal_node(node: RealNode, signum: int) -> None:
    for pid in node_processes(node):
        os.kill(pid, signum)
    signal_containers(node, signum)


def fault_file(node: RealNode) -> Path:
    return node.state_dir / "fault"


def fault(node: RealNode) -> str | None:
    """The fault NODE is in (FAULTS), None when it runs."""
    try:
        return fault_file(node).read_text().strip() or None
    except OSError:
        return None


def lose(node: RealNode) -> None:
    """A power cut: NODE's processes and containers are killed, and its link goes (nothing answers there)."""
    cut(node)
    for pid in node_processes(node):
        os.kill(pid, signal.SIGKILL)
    kill_containers(node)
    fault_file(node).write_text("lost\n")
    log(f"{node.name} lost: its processes and containers killed, its link down")


def freeze(node: RealNode) -> None:
    """NODE hangs: SIGSTOP to its processes, its containers and their shims (the kernel still answers)."""
    signal_node(node, signal.SIGSTOP)
    fault_file(node).write_text("frozen\n")
    log(f"{node.name} frozen")


def cut_off(node: RealNode) -> None:
    """NODE's link goes down: its pods run on, reaching only each other and the node."""
    cut(node)
    fault_file(node).write_text("cut\n")
    log(f"{node.name} cut off")


def drain(node: RealNode, kubectl: Kubectl) -> None:
    """`kubectl drain`: cordoned, its pods evicted as their PodDisruptionBudgets allow."""
    fault_file(node).write_text("drained\n")
    kubectl("drain", node.name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s")
    log(f"{node.name} drained")


def bring_back(node: RealNode, engine: Path, bins: Path, kubectl: Kubectl) -> None:
    """Undo NODE's fault: a lost node boots (containerd, then the rest), a frozen one thaws, a cut one's link
    comes back, a drained one is uncordoned."""
    what = fault(node)
    if what == "lost":
        mend(node)
        start_containerd(node, node.state_dir / "containerd.toml")
        start_node(node, engine, bins)
    elif what == "frozen":
        signal_node(node, signal.SIGCONT)
    elif what == "cut":
        mend(node)
    elif what == "drained":
        kubectl("uncordon", node.name)
    fault_file(node).unlink(missing_ok=True)
    log(f"{node.name} back" + (f" (it was {what})" if what else " (it had no fault)"))


# -------------------------------------------------------------------- down


def down(grace: float = 0, pause: bool = False) -> None:
    """Remove everything `up` made on this host but the images; safe to run on half-started or half-dead nodes.
    GRACE: seconds the containers get to end on SIGTERM before they are killed. PAUSE: `stop`, which `up`
    resumes: containerd keeps the containers' records (their data is on the volumes either way)."""
    nodes = real_nodes()
    for node in nodes:
        if fault(node) == "frozen":
            signal_node(node, signal.SIGCONT)  # a stopped process ends on SIGKILL alone
        stop(node.component("kubelet"))
    if grace:
        terminate_containers(grace)
    kill_containers()
    for node in nodes:
        if not pause:
            forget_containers(node)
        for name in ("kube-router", "kube-proxy", "containerd"):
            stop(node.component(name))
        fault_file(node).unlink(missing_ok=True)
    for name in ("coredns", "local-volumes", "registry-nodes", "registry"):
        stop(name)
    unmount_all()  # the pods' mounts, then the volumes' (deepest first): `-o loop` devices go with them
    remove_network()
    node_policies.remove_sets()
    node_policies.remove_cpu_caps()
    remove_cgroups()
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    release()


def leftovers() -> list[str]:
    """Everything of the nodes still on this host: empty after `down`."""
    names = HOST_COMPONENTS + [node.component(name) for node in real_nodes() for name in NODE_COMPONENTS]
    found = [f"process {name} (pid {running_pid(name)})" for name in names if running_pid(name)]
    found += [f"container process {pid}" for pid in our_processes()]
    found += [f"mount {point}" for point in our_mounts()]
    found += [f"loop device {device}" for device in local_volumes.our_loop_devices(str(STATE_DIR))]
    found += [f"network namespace {name}" for name in cni_namespaces() + our_netns()]
    found += [f"link {link}" for link in our_links()]
    found += [f"iptables {table} chain {chain}" for table, chains in our_chains().items() for chain in chains]
    found += [f"ipset {name}" for name in node_policies.our_sets()]
    found += [f"cgroup {group}" for group in node_policies.our_cpu_groups() + our_cgroups()]
    if route_present():
        found.append(f"route unreachable {SAFE_RANGE}")
    if RUN_DIR.exists():
        found.append(f"folder {RUN_DIR}")
    if owner():
        found.append(f"file {OWNER_FILE}")
    return found
