"""The real node's network: the pod bridge, the unreachable route for the safe
range, the forward guard and the CNI configuration; and, for `down`, finding
and removing all of it again (hack/node.py says what the rules are).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from harness import SAFE_RANGE, STATE_DIR, log, run

BRIDGE = "mydb0"
NODE_SUBNET = "198.18.128.0/24"  # the real node's pods, apart from kwok's 198.18.0.0/17
NODE_IP = "198.18.128.1"  # the host on the bridge: kubelet, CoreDNS, the API server for pods
# Locally administered, spelling NODE_IP. A bridge without an address of its
# own takes its lowest port's, so a pod leaving changed the gateway's MAC under
# every other pod: their DNS and Service traffic went nowhere until ARP gave up
# on the old one, 10-40 s later.
BRIDGE_MAC = "02:00:c6:12:80:01"
GUARD_CHAIN = "MYDB-GUARD"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ["bridge", "host-local", "loopback"]


def link_exists(name: str) -> bool:
    return run("ip", "link", "show", name, check=False).returncode == 0


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def setup_network() -> None:
    run("ip", "route", "replace", "unreachable", SAFE_RANGE)
    if not link_exists(BRIDGE):
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "link", "set", BRIDGE, "address", BRIDGE_MAC)
    run("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # Forwarding only for packets that arrive on the bridge (pod -> Service
    # -> pod); the host's other interfaces keep forwarding off.
    sysctl_path(f"net.ipv4.conf.{BRIDGE}.forwarding").write_text("1")
    # kube-proxy's DNAT must see replies bridged between two pods; the old
    # value is put back by `down`.
    saved = STATE_DIR / "sysctl.json"
    nf = "net.bridge.bridge-nf-call-iptables"
    if not saved.exists():
        saved.write_text(json.dumps({nf: sysctl_path(nf).read_text().strip()}))
    sysctl_path(nf).write_text("1")
    install_guard()
    log(f"network: bridge {BRIDGE} {NODE_IP}/24, unreachable route for {SAFE_RANGE}, forward guard {GUARD_CHAIN}")


def install_guard() -> None:
    """Drop whatever is forwarded between the bridge and any other interface.

    In the mangle table, which runs before kube-proxy's filter rules, so no
    Service endpoint outside the range (and no masquerade) can open a way out."""
    run("iptables", "-t", "mangle", "-N", GUARD_CHAIN, check=False)
    run("iptables", "-t", "mangle", "-F", GUARD_CHAIN)
    for rule in ([f"-i {BRIDGE} -o {BRIDGE} -j RETURN"], [f"-i {BRIDGE} -j DROP"], [f"-o {BRIDGE} -j DROP"]):
        run("iptables", "-t", "mangle", "-A", GUARD_CHAIN, *rule[0].split())
    if run("iptables", "-t", "mangle", "-C", "FORWARD", "-j", GUARD_CHAIN, check=False).returncode != 0:
        run("iptables", "-t", "mangle", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)


def write_cni_config() -> Path:
    conf_dir = STATE_DIR / "cni" / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    network = {
        "cniVersion": "1.0.0",
        "name": "mydb",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                # The harness owns the bridge address; the plugin neither takes
                # the gateway address nor turns on forwarding host-wide.
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(STATE_DIR / "cni" / "ipam"),
                    "ranges": [[{"subnet": NODE_SUBNET, "rangeStart": "198.18.128.10", "gateway": NODE_IP}]],
                    "routes": [{"dst": SAFE_RANGE, "gw": NODE_IP}],
                },
            }
        ],
    }
    (conf_dir / "10-mydb.conflist").write_text(json.dumps(network, indent=2) + "\n")
    return conf_dir


# -------------------------------------------------------------------- down


def our_links() -> list[str]:
    """The bridge and every link enslaved to it (the pods' veth ends)."""
    out = run("ip", "-j", "link", "show", check=False).stdout or "[]"
    return [link["ifname"] for link in json.loads(out) if link["ifname"] == BRIDGE or link.get("master") == BRIDGE]


def remove_links() -> None:
    for link in sorted(our_links(), key=lambda name: name == BRIDGE):  # the bridge last
        run("ip", "link", "delete", link, check=False)


OUR_CHAIN = re.compile(r"^:((KUBE|MYDB)-[A-Z0-9-]+) ", re.M)


def our_chains() -> dict[str, list[str]]:
    """table -> the KUBE-* (kube-proxy, kubelet) and MYDB-* chains in it."""
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


def cni_namespaces() -> list[str]:
    """Pod network namespaces that containerd left in /run/netns (where netns_mounts_under_state_dir is unknown)."""
    folder = Path("/run/netns")
    return sorted(p.name for p in folder.glob("cni-*")) if folder.is_dir() else []


def remove_network() -> None:
    """The pods' network namespaces, the links, the iptables chains and the route go; the sysctls are put back."""
    for namespace in cni_namespaces():
        run("ip", "netns", "delete", namespace, check=False)
    remove_links()
    remove_chains()
    if route_present():
        run("ip", "route", "del", "unreachable", SAFE_RANGE, check=False)
    saved = STATE_DIR / "sysctl.json"
    if saved.exists():
        for name, value in json.loads(saved.read_text()).items():
            sysctl_path(name).write_text(value)
