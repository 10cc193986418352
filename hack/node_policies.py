"""The real nodes' NetworkPolicy engine: kube-router's firewall controller, and nothing else of kube-router,
one in each node's network namespace.

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

from harness import HACK_DIR, SERVICE_CIDR, log, make_cert, run, running_pid, start, user_cluster_role, wait_until
from node_layout import RealNode

USER = "mydb:kube-router"
# Its firewall controller rewrites the node's rules after every change of any pod in the cluster (kwok's
# too), one sync right after the other while pods come and go, each some 20 iptables runs: about a tenth
# of the test run's CPU. Under a cap, changes that arrive during a sync wait for the next one, as under
# kube-proxy's --iptables-min-sync-period: fewer syncs, each a second or two later at most.
CPU_CAP = 0.05  # of one core, each
CPU_PERIOD_US = 100_000
CPU_GROUP = re.compile(r"^mydb-kube-router(-\d+)?$")
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


def programmed(node: RealNode) -> bool:
    """Its chains are in the node's filter table: it has synced its informers and written its first rules."""
    dump = run(*node.in_netns("iptables-save", "-t", "filter"), check=False).stdout
    return ":KUBE-ROUTER-FORWARD " in dump


def start_network_policies(node: RealNode, engine: Path, kubeconfig: Path) -> None:
    name = node.component("kube-router")
    start(
        name,
        node.in_netns(
            str(engine),
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={node.name}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--run-loadbalancer=false",
            "--enable-cni=false",
            "--enable-pod-egress=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--health-port=0",  # its default listens on every address
            "--metrics-port=0",
        ),
    )
    wait_until(f"{name} (NetworkPolicy)", lambda: programmed(node), process=name)
    cap_cpu(name)


def cpu_groups(name: str) -> tuple[Path, Path]:
    """The cgroup that caps NAME's CPU: (v1, v2)."""
    return Path(f"/sys/fs/cgroup/cpu/mydb-{name}"), Path(f"/sys/fs/cgroup/mydb-{name}")


def cap_cpu(name: str) -> None:
    """Once its first rules are written: kube-router and the iptables it runs get CPU_CAP of a core
    (a cgroup of the cpu controller, v1 or v2). A host that offers neither runs it uncapped."""
    pid = running_pid(name)
    quota = str(int(CPU_CAP * CPU_PERIOD_US))
    v1, v2 = cpu_groups(name)
    try:
        if v1.parent.is_dir():
            v1.mkdir(exist_ok=True)
            (v1 / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (v1 / "cpu.cfs_quota_us").write_text(quota)
            group = v1
        else:
            (v2.parent / "cgroup.subtree_control").write_text("+cpu")
            v2.mkdir(exist_ok=True)
            (v2 / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
            group = v2
        (group / "cgroup.procs").write_text(str(pid))
    except OSError as error:
        log(f"{name} runs without a CPU cap ({error})")
        return
    log(f"{name} capped at {CPU_CAP:.0%} of a core ({group})")


def our_cpu_groups() -> list[Path]:
    return [
        p
        for top in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup"))
        for p in top.glob("mydb-kube-router*")
        if CPU_GROUP.match(p.name)
    ]


def remove_cpu_caps() -> None:
    """After the kube-routers and their iptables runs are gone: a cgroup with a process in it cannot go."""
    for group in our_cpu_groups():
        try:
            group.rmdir()
        except OSError as error:
            log(f"could not remove {group}: {error}")


def our_sets() -> list[str]:
    """The host's sets of ours (the nodes' own go with their namespaces): a kube-router of the one-node layout."""
    if not shutil.which("ipset"):  # not installed yet (make node-packages): no set of ours either
        return []
    names = run("ipset", "list", "-n", check=False).stdout.split()
    return [name for name in names if OUR_SET.match(name)]


def remove_sets() -> None:
    """After its iptables rules are gone (node_network.remove_chains): a set in use cannot go."""
    for name in our_sets():
        run("ipset", "destroy", name, check=False)
