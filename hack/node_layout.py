"""Where each real node lives: its name, network namespace, addresses, folders and process names.

Each real node is a network namespace of its own (mydb-node-N) joined to the host's bridge by a veth pair,
with its pods on a bridge inside it; its containerd, kubelet, kube-proxy and kube-router run in that
namespace (hack/node.py puts them together). Only the layout is here: pure names, no side effects.

    host bridge mydb0  198.18.128.1/24       the API server, CoreDNS and the registry, as the nodes see them
    node N             198.18.128.(10+N)     its veth's inner end (eth0), the Node's InternalIP
    node N's pods      198.18.(130+N).0/24   on the bridge pods0 inside the namespace, gateway .1
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness import CACHE_DIR, PORT_BASE, STATE_DIR

HOST_BRIDGE = "mydb0"
HOST_IP = "198.18.128.1"  # the host on the nodes' bridge: kubelets, pods and containerd reach it here
NODES_SUBNET = "198.18.128.0/24"
# Locally administered, spelling HOST_IP. A bridge without an address of its own takes its lowest port's, so a
# node leaving changed the gateway's MAC under every other one: their traffic went nowhere until ARP gave up.
HOST_BRIDGE_MAC = "02:00:c6:12:80:01"
POD_BRIDGE = "pods0"  # inside each node's namespace
NODE_LABEL = "node.mydb.local/real"  # label and taint key: only pods that ask land on a real node
# Unix sockets have a 108-byte path limit: keep them out of a deep checkout.
RUN_DIR = Path(f"/run/mydb-cluster-{PORT_BASE}")
MAX_NODES = 9  # the addresses below leave room for nine


def node_count() -> int:
    """MYDB_REAL_NODES (default 3): a replica on each of three nodes outlives the loss of one."""
    count = int(os.environ.get("MYDB_REAL_NODES", "3"))
    if not 1 <= count <= MAX_NODES:
        raise SystemExit(f"MYDB_REAL_NODES={count}: between 1 and {MAX_NODES} real nodes")
    return count


@dataclass(frozen=True)
class RealNode:
    """Real node number INDEX (1-based)."""

    index: int

    @property
    def name(self) -> str:
        return f"mydb-real-{self.index}"

    @property
    def netns(self) -> str:
        return f"mydb-node-{self.index}"

    @property
    def ip(self) -> str:
        return f"198.18.128.{10 + self.index}"

    @property
    def pod_subnet(self) -> str:
        return f"198.18.{130 + self.index}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"198.18.{130 + self.index}.1"

    @property
    def host_link(self) -> str:
        """The veth's end on the host, a port of HOST_BRIDGE; its other end is eth0 in the namespace."""
        return f"mydbn{self.index}"

    @property
    def run_dir(self) -> Path:
        return RUN_DIR / f"node-{self.index}"

    @property
    def state_dir(self) -> Path:
        return STATE_DIR / "nodes" / str(self.index)

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def containerd_root(self) -> Path:
        """Outlives `down`, so images are unpacked once: a new cluster's first pods waited 12 s for postgres:15.
        One per port base and node (its images are named by the registry's port)."""
        return CACHE_DIR / f"containerd-{PORT_BASE}-node-{self.index}"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's --cgroup-root: each kubelet removes the pod cgroups it does not know under its own."""
        return f"/mydb-node-{self.index}"

    @property
    def pod_logs(self) -> Path:
        return Path("/var/log/pods") / self.name

    def component(self, name: str) -> str:
        """The harness's name for this node's copy of NAME (its pid and log files): kubelet-2."""
        return f"{name}-{self.index}"

    def in_netns(self, *args: str) -> list[str]:
        """ARGS run in this node's network namespace only (nsenter, not `ip netns exec`: that one also gives the
        command a mount namespace of its own, and the kubelet's mounts must be the host's, where containerd
        and the containers see them)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *args]


def real_nodes() -> list[RealNode]:
    return [RealNode(index) for index in range(1, node_count() + 1)]
