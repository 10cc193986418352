"""Setting up: the tools, the control plane, the operator under test, the machine's facts, the databases."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from . import apf, kube, prom
from .measure import log
from .process import REPO, OperatorProcess

SA_NAMESPACE, SA_NAME = "mydb-system", "mydb-operator"  # what hack/install-dev.sh installs
SCHEDULES = ("30 4 29 2 *", "45 4 29 2 *")  # Feb 29 only: no backup Job fires during a run


def bin_dir() -> str:
    out = subprocess.run(
        ["bash", str(REPO / "hack" / "build-tools.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return out.strip().splitlines()[-1]


def cluster_up() -> bool:
    """Start the control plane unless it is healthy; True if this call started it.

    Without the real node unless asked (MYDB_REAL_NODE=1): every benchmark pod
    runs on kwok, and the node's kube-proxy would only add the cost of
    programming iptables for hundreds of Services to the machine's load."""
    os.environ.setdefault("MYDB_REAL_NODE", "0")
    status = subprocess.run([sys.executable, str(REPO / "hack" / "cluster.py"), "status"], capture_output=True)
    if status.returncode == 0:
        return False
    log("starting the local control plane (hack/cluster.py up)")
    subprocess.run([sys.executable, str(REPO / "hack" / "cluster.py"), "up"], check=True, stdout=subprocess.DEVNULL)
    return True


def cluster_down() -> None:
    subprocess.run(
        [sys.executable, str(REPO / "hack" / "cluster.py"), "down"],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def machine_facts(cluster: kube.Cluster, bins: str) -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    def run(*args: str) -> str:
        result = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
        return result.stdout.strip() if result.returncode == 0 else "?"

    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "?",
    )
    dirty = run("git", "status", "--porcelain", "--untracked-files=no")
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gb": round(psutil.virtual_memory().total / 1024**3, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kubernetes_server": cluster.server_version(),
        "kubectl": run(f"{bins}/kubectl", "version", "--client").splitlines()[0].split()[-1],
        "helm": run(f"{bins}/helm", "version", "--template", "{{.Version}}"),
        "kopf": version("kopf"),
        "kubernetes_client": version("kubernetes"),
        "pyhelm3": version("pyhelm3"),
        "psutil": version("psutil"),
        "operator": version("mydatabase-operator"),
        "git_commit": run("git", "rev-parse", "--short", "HEAD") + ("-dirty" if dirty and dirty != "?" else ""),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def database(name: str, schedule: str, hibernate: bool = False) -> dict[str, Any]:
    spec = {"replicas": 3, "version": "15.2", "storage": "1Gi", "backup": {"schedule": schedule}}
    if hibernate:
        spec["hibernate"] = True  # StatefulSet at 0 replicas: no pod to schedule or wait for
    return {"apiVersion": f"{kube.GROUP}/{kube.VERSION}", "kind": kube.KIND, "metadata": {"name": name}, "spec": spec}


WATCHED = (
    "mydatabases",
    "pods",
    "services",
    "persistentvolumeclaims",
    "statefulsets",
    "cronjobs",
    "jobs",
    "configmaps",
    "endpointslices",
)


def wait_watching(
    cluster: kube.Cluster, before: prom.Samples, meaning: dict[str, tuple[str, str]], timeout: float = 60
) -> None:
    """Wait until the operator has opened its watches, so that start-up is not counted as the create wave."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watches = apf.operator_requests(prom.diff(cluster.apiserver_metrics(), before), meaning).get("watch", {})
        if all(watches.get(kind) for kind in WATCHED):
            return
        time.sleep(0.5)
    log(f"the operator did not open all its watches within {timeout:.0f}s; going on")


def new_operator(ctx: argparse.Namespace, log_name: str) -> OperatorProcess:
    # Leader election is on by default; its Lease goes where that ServiceAccount may write one.
    return OperatorProcess(
        ctx.sa_kubeconfig,
        f"{ctx.bins}/helm",
        ctx.bins,
        ctx.logs / log_name,
        resync=ctx.resync,
        helm_parallel=ctx.parallel,
        rollout_window=ctx.rollout_window,
        extra_args=["--leader-lease-namespace", SA_NAMESPACE],
    )


def start_operator(ctx: argparse.Namespace, log_name: str) -> OperatorProcess:
    """The operator as a child process, once it watches everything (start-up is not part of a wave)."""
    operator = new_operator(ctx, log_name)
    started = ctx.cluster.apiserver_metrics()
    operator.start()
    wait_watching(ctx.cluster, started, ctx.meaning)
    return operator
