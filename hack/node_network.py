"""The real nodes' network: the host's bridge and unreachable route, a network namespace per node joined to
that bridge, the pods' bridge and routes inside it, the forward guards and the CNI configuration; cutting a
node's link and mending it; and, for `down`, finding and removing all of it again (hack/node.py says what
the rules are, hack/node_layout.py the addresses).
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import shutil
from pathlib import Path

from harness import SAFE_RANGE, log, run
from node_layout import HOST_BRIDGE, HOST_BRIDGE_MAC, HOST_IP, NODES_SUBNET, POD_BRIDGE, RealNode

GUARD_CHAIN = "MYDB-GUARD"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ["bridge", "host-local", "loopback"]
NETNS_DIR = Path("/run/netns")
OUR_NETNS = re.compile(r"^mydb-node-\d+$")


def link_exists(name: str) -> bool:
    return run("ip", "link", "show", name, check=False).returncode == 0


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def in_netns(node: RealNode, *args: str, check: bool = True) -> None:
    run("ip", "netns", "exec", node.netns, *args, check=check)


def setup_host_network() -> None:
    """The host's side: the unreachable route for the whole range, the bridge every node is a port of (the host
    does no routing between them: the nodes route each other's pods over it), and the guard."""
    run("ip", "route", "replace", "unreachable", SAFE_RANGE)
    if not link_exists(HOST_BRIDGE):
        run("ip", "link", "add", HOST_BRIDGE, "type", "bridge")
    run("ip", "link", "set", HOST_BRIDGE, "address", HOST_BRIDGE_MAC)
    run("ip", "addr", "replace", f"{HOST_IP}/24", "dev", HOST_BRIDGE)
    run("ip", "link", "set", HOST_BRIDGE, "up")
    install_host_guard()
    log(f"network: bridge {HOST_BRIDGE} {HOST_IP}/24, unreachable route for {SAFE_RANGE}, guard {GUARD_CHAIN}")


def install_host_guard() -> None:
    """Drop whatever is forwarded between the bridge and any other interface of the host.

    In the mangle table, before any filter rule, so that nothing a node's pods send can leave through the host."""
    run("iptables", "-t", "mangle", "-N", GUARD_CHAIN, check=False)
    run("iptables", "-t", "mangle", "-F", GUARD_CHAIN)
    rules = (f"-i {HOST_BRIDGE} -o {HOST_BRIDGE} -j RETURN", f"-i {HOST_BRIDGE} -j DROP", f"-o {HOST_BRIDGE} -j DROP")
    for rule in rules:
        run("iptables", "-t", "mangle", "-A", GUARD_CHAIN, *rule.split())
    if run("iptables", "-t", "mangle", "-C", "FORWARD", "-j", GUARD_CHAIN, check=False).returncode != 0:
        run("iptables", "-t", "mangle", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)


def pod_bridge_mac(node: RealNode) -> str:
    """Locally administered and fixed, as the host bridge's: a pod leaving must not change the pods' gateway."""
    return f"02:00:c6:12:{130 + node.index:02x}:01"


def setup_node_network(node: RealNode, nodes: list[RealNode]) -> None:
    """NODE's namespace: eth0 on the host's bridge, its pods' bridge, routes to every other node's pods (over
    the bridge, straight to that node) and none anywhere else; the host routes to NODE's pods through it."""
    if not (NETNS_DIR / node.netns).exists():
        run("ip", "netns", "add", node.netns)
    if not link_exists(node.host_link):
        run("ip", "link", "add", node.host_link, "type", "veth", "peer", "name", "eth0", "netns", node.netns)
    run("ip", "link", "set", node.host_link, "master", HOST_BRIDGE, "up")
    in_netns(node, "ip", "link", "set", "lo", "up")
    in_netns(node, "ip", "addr", "replace", f"{node.ip}/24", "dev", "eth0")
    in_netns(node, "ip", "link", "set", "eth0", "up")
    in_netns(node, "ip", "link", "add", POD_BRIDGE, "type", "bridge", check=False)
    in_netns(node, "ip", "link", "set", POD_BRIDGE, "address", pod_bridge_mac(node))
    in_netns(node, "ip", "addr", "replace", f"{node.pod_gateway}/24", "dev", POD_BRIDGE)
    in_netns(node, "ip", "link", "set", POD_BRIDGE, "up")
    # The namespace's own settings: it forwards between its pods and eth0, and its kube-proxy's DNAT must see
    # the replies bridged between two of its pods.
    in_netns(node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1")
    in_netns(node, "ip", "route", "replace", "unreachable", SAFE_RANGE)
    for other in nodes:
        if other != node:
            in_netns(node, "ip", "route", "replace", other.pod_subnet, "via", other.ip)
    install_node_guard(node)
    run("ip", "route", "replace", node.pod_subnet, "via", node.ip, "dev", HOST_BRIDGE)
    log(f"network: node {node.name} in namespace {node.netns}, {node.ip} on {HOST_BRIDGE}, pods {node.pod_subnet}")


def install_node_guard(node: RealNode) -> None:
    """In the node's mangle table, before kube-proxy's filter rules: nothing is forwarded to an address outside
    the safe range, whatever a Service's endpoints say (the namespace has no default route either)."""
    in_netns(node, "iptables", "-t", "mangle", "-N", GUARD_CHAIN, check=False)
    in_netns(node, "iptables", "-t", "mangle", "-F", GUARD_CHAIN)
    in_netns(node, "iptables", "-t", "mangle", "-A", GUARD_CHAIN, "!", "-d", SAFE_RANGE, "-j", "DROP")
    in_netns(node, "iptables", "-t", "mangle", "-D", "FORWARD", "-j", GUARD_CHAIN, check=False)
    in_netns(node, "iptables", "-t", "mangle", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)


def write_cni_config(node: RealNode) -> Path:
    conf_dir = node.state_dir / "cni" / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    network = {
        "cniVersion": "1.0.0",
        "name": "mydb",
        "plugins": [
            {
                "type": "bridge",
                "bridge": POD_BRIDGE,
                # The harness owns the bridge address; the plugin neither takes
                # the gateway address nor turns on forwarding.
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.state_dir / "cni" / "ipam"),
                    "ranges": [
                        [
                            {
                                "subnet": node.pod_subnet,
                                "rangeStart": node.pod_gateway[:-1] + "10",
                                "gateway": node.pod_gateway,
                            }
                        ]
                    ],
                    "routes": [{"dst": SAFE_RANGE, "gw": node.pod_gateway}],
                },
            }
        ],
    }
    (conf_dir / "10-mydb.conflist").write_text(json.dumps(network, indent=2) + "\n")
    return conf_dir


# ------------------------------------------------------------ faults


def cut(node: RealNode) -> None:
    """NODE's link to the host's bridge goes down: its pods reach each other and the node, nothing else (not the
    API server, not the other nodes, not their pods), and nothing reaches them."""
    run("ip", "link", "set", node.host_link, "down")


def mend(node: RealNode) -> None:
    run("ip", "link", "set", node.host_link, "up")


def is_cut(node: RealNode) -> bool:
    out = run("ip", "-j", "link", "show", node.host_link, check=False).stdout or "[]"
    return any("UP" not in link.get("flags", []) for link in json.loads(out))


# -------------------------------------------------------------------- down


def our_netns() -> list[str]:
    return (
        sorted(p.name for p in NETNS_DIR.glob("mydb-node-*") if OUR_NETNS.match(p.name)) if NETNS_DIR.is_dir() else []
    )


def our_links() -> list[str]:
    """The host's bridge and every link enslaved to it (the nodes' veth ends)."""
    out = run("ip", "-j", "link", "show", check=False).stdout or "[]"
    return [
        link["ifname"] for link in json.loads(out) if link["ifname"] == HOST_BRIDGE or link.get("master") == HOST_BRIDGE
    ]


def remove_links() -> None:
    for link in sorted(our_links(), key=lambda name: name == HOST_BRIDGE):  # the bridge last
        run("ip", "link", "delete", link, check=False)


OUR_CHAIN = re.compile(r"^:((KUBE|MYDB)-[A-Z0-9-]+) ", re.M)


def our_chains() -> dict[str, list[str]]:
    """table -> the host's KUBE-* and MYDB-* chains (the nodes' own go with their namespaces)."""
    chains: dict[str, list[str]] = {}
    if not shutil.which("iptables-save"):  # not installed yet (make node-packages): no chain of ours either
        return chains
    for table in ("filter", "nat", "mangle", "raw"):
        dump = run("iptables-save", "-t", table, check=False).stdout
        found = OUR_CHAIN.findall(dump)
        if found:
            chains[table] = [name for name, _ in found]
    return chains


def remove_chains() -> None:
    for table, chains in our_chains().items():
        dump = run("iptables-save", "-t", table).stdout
        # Rules in built-in chains that jump to ours go first, then ours.
        for line in dump.splitlines():
            match = re.match(r"^-A (\S+) (.*-j (?:KUBE|MYDB)-\S+.*)$", line)
            if match and match.group(1) not in chains:
                run("iptables", "-t", table, "-D", match.group(1), *shlex.split(match.group(2)), check=False)
        for chain in chains:
            run("iptables", "-t", table, "-F", chain, check=False)
        for chain in chains:
            run("iptables", "-t", table, "-X", chain, check=False)


def route_present() -> bool:
    return SAFE_RANGE in run("ip", "route", "show", "type", "unreachable", check=False).stdout


def node_routes() -> list[str]:
    """The host's routes to the nodes' pods (via the nodes' addresses on the bridge)."""
    out = run("ip", "-j", "route", "show", "dev", HOST_BRIDGE, check=False).stdout if link_exists(HOST_BRIDGE) else ""
    nodes = ipaddress.ip_network(NODES_SUBNET)
    return [
        route["dst"]
        for route in json.loads(out or "[]")
        if ipaddress.ip_address(route.get("gateway", "0.0.0.0")) in nodes
    ]


def cni_namespaces() -> list[str]:
    """Pod network namespaces that containerd left in /run/netns (where netns_mounts_under_state_dir is unknown)."""
    return sorted(p.name for p in NETNS_DIR.glob("cni-*")) if NETNS_DIR.is_dir() else []


def remove_network() -> None:
    """The nodes' namespaces (their links, iptables rules and ipsets with them), the pods' leftover namespaces,
    the host's links, chains and routes."""
    for namespace in cni_namespaces() + our_netns():
        run("ip", "netns", "delete", namespace, check=False)
    for destination in node_routes():
        run("ip", "route", "del", destination, check=False)
    remove_links()
    remove_chains()
    if route_present():
        run("ip", "route", "del", "unreachable", SAFE_RANGE, check=False)
