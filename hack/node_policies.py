"""The real node's NetworkPolicy engine: kube-router's firewall controller, and nothing else of kube-router.

The bridge CNI plugin enforces no NetworkPolicy. kube-router's firewall
controller programs iptables and ipsets for the pods of its own node (those
whose status.hostIP is the node's address; kwok's pods are not), matching
bridged traffic (physdev), beside kube-proxy's iptables Services. Its router,
its service proxy and its load balancer stay off: the flaws reported against
v2.1.0 are in those controllers, which are then never made, and the build
raises the dependencies with reported flaws (hack/build-kube-router.sh).
docs/real-node.md says why this engine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness import HACK_DIR, SERVICE_CIDR, make_cert, run, start, user_cluster_role, wait_until
from node_kubelet import NODE_NAME

USER = "mydb:kube-router"
# Its sets: KUBE-SRC-*, KUBE-DST-* per policy, and kube-router's own.
OUR_SET = re.compile(r"^(KUBE-|kube-router-)")


def binary() -> Path:
    """Build it if needed (a cache hit is instant) and return its path."""
    out = subprocess.run(
        ["bash", str(HACK_DIR / "build-kube-router.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


def make_pki() -> None:
    make_cert("kube-router", f"/CN={USER}")


def rbac() -> dict[str, Any]:
    """What its informers list and watch (it waits for all of them), and nothing it may change."""
    watched = ["pods", "namespaces", "nodes", "services", "endpoints"]
    return user_cluster_role(
        USER,
        [
            {"apiGroups": [""], "resources": watched, "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    )


def programmed() -> bool:
    """Its chains are in the filter table: it has synced its informers and written its first rules."""
    dump = run("iptables-save", "-t", "filter", check=False).stdout
    return ":KUBE-ROUTER-FORWARD " in dump


def start_network_policies(engine: Path, kubeconfig: Path) -> None:
    start(
        "kube-router",
        [
            str(engine),
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={NODE_NAME}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--run-loadbalancer=false",
            "--enable-cni=false",
            "--enable-pod-egress=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--health-port=0",  # its default listens on every address
            "--metrics-port=0",
        ],
    )
    wait_until("kube-router (NetworkPolicy)", programmed, process="kube-router")


def our_sets() -> list[str]:
    if not shutil.which("ipset"):  # not installed yet (make node-packages): no set of ours either
        return []
    names = run("ipset", "list", "-n", check=False).stdout.split()
    return [name for name in names if OUR_SET.match(name)]


def remove_sets() -> None:
    """After its iptables rules are gone (node_network.remove_chains): a set in use cannot go."""
    for name in our_sets():
        run("ipset", "destroy", name, check=False)
