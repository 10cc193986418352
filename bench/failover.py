"""Failover and switchover on the real nodes: how long clients cannot write.

    .venv/bin/python -m bench.failover [--trials 5] [--kinds hang,delete,lost,switchover,cutoff,nodelost]
    (make bench-failover)

Needs the local cluster with its real nodes and the images in its registry (run
`make demo` first). In a fresh namespace, an operator from this checkout (the
platform config of examples/platform-local-node.yaml, leader election off)
runs a database of 3 pods like the seed's (1Gi volumes, the seed's version),
one on each real node, and a client pod on a real node (not the primary's)
commits one row per connection through the read-write Service, in a loop,
logging each commit's time and server (the e2e tests' writer,
tests/e2e/primaries.py). Each trial, once the database is Ready with both
replicas streaming:

- hang: the primary's postmaster stopped from the host (SIGSTOP), at the
  database's default failoverDelay; the figure is the time from the stop to the
  first commit on another server (the issue's target: 15 s);
- delete: the primary's pod deleted with a 1 s grace period; from the delete
  to the first commit on another server (target: 10 s). The pod comes back at
  once, and the operator waits for it rather than fail over (the trial's
  `moved` says which happened);
- lost: the same with the primary's node cordoned, so the pod cannot come back
  (its volume is that node's): a failover; from the delete to the first commit
  on another server;
- switchover: the annotation naming the most advanced replica; the longest gap
  between two commits around it (target: under 5 s);
- cutoff: the primary's node cut off (`hack/cluster.py node cut`: its link
  down; its pods reach only each other), with a client on the node writing to
  the old primary over its unix socket: from the cut to the first commit on
  another server (target 15 s), to the old primary's last acknowledged write
  (`cutoff-refused`, target 10 s), and the old primary's writes acknowledged
  after the new one's first (0); then the node is brought back;
- nodelost: the primary's node lost (`hack/cluster.py node lose`: a power cut,
  its processes and containers killed, its link down): from the loss to the
  first commit on another server (target 15 s); then the node is brought back.

Median, min and max of the trials go to stdout and, with every trial, to a JSON
file in --out. CloudNativePG's published budgets are the figures to beat: 10 s
failover (primary pod deleted with a 1 s grace period), 20 s switchover.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mydb_operator.config import Config

from . import stats
from .measure import log
from .process import REPO, OperatorProcess
from .real_node import platform_config
from .setup import bin_dir

sys.path.insert(0, str(REPO / "tests"))
from e2e import nodes, primaries  # the e2e tests' writer, process and node tools, under tests/

NAME = "bench-ha"
TARGETS = {
    "hang": 15.0,
    "delete": 10.0,
    "lost": 10.0,
    "switchover": 5.0,
    "cutoff": 15.0,
    "cutoff-refused": 10.0,
    "nodelost": 15.0,
}


@dataclass
class Cluster:
    """What tests/e2e/primaries.py needs of a cluster: kubectl."""

    kubeconfig: Path
    bin_dir: str

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [f"{self.bin_dir}/kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            text=True,
            capture_output=True,
            timeout=300,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result

    def status(self, namespace: str) -> dict[str, Any]:
        found = self.kubectl("get", "-n", namespace, "mydb", NAME, "-o", "json", check=False)
        return (json.loads(found.stdout).get("status") or {}) if found.returncode == 0 else {}


def wait(what: str, check: Callable[[], object], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def settled(cluster: Cluster, namespace: str) -> str:
    """Wait until the database is Ready with both replicas streaming; its primary."""

    def ready() -> bool:
        facts = cluster.status(namespace)
        instances = facts.get("instances") or []
        streaming = [i for i in instances if i.get("state") == "streaming"]
        return bool(facts.get("ready")) and len(streaming) == 2 and facts.get("primary") == facts.get("targetPrimary")

    wait("the database Ready, both replicas streaming", ready)
    primary: str = cluster.status(namespace)["primary"]
    return primary


def trial(cluster: Cluster, namespace: str, kind: str) -> dict[str, Any]:
    primary = settled(cluster, namespace)
    address = primaries.pod_ip(cluster, namespace, primary)
    node = nodes.node_of(cluster, namespace, primary)
    # A client away from the primary's node, which a trial may lose or cut off.
    writer = primaries.Writer(cluster, namespace, NAME, away_from=node.name)
    try:
        return measured(cluster, namespace, kind, primary, address, node, writer)
    finally:
        writer.halt()


def measured(
    cluster: Cluster,
    namespace: str,
    kind: str,
    primary: str,
    address: str,
    node: Any,
    writer: primaries.Writer,
) -> dict[str, Any]:
    started = time.time()
    if kind == "hang":
        pid = primaries.postgres_pid(cluster, namespace, primary)
        primaries.hang(pid)
        try:
            wait("a commit on another server", lambda: writer.first_after(started, address), 120)
        finally:
            primaries.resume(pid)
    elif kind == "delete":
        cluster.kubectl("delete", "pod", "-n", namespace, primary, "--grace-period=1", "--wait=false")
        wait("a commit on another server", lambda: writer.first_after(started, address), 120)
    elif kind == "lost":
        cluster.kubectl("cordon", node.name)  # the deleted pod cannot come back: a lost node's
        try:
            cluster.kubectl("delete", "pod", "-n", namespace, primary, "--grace-period=1", "--wait=false")
            wait("a commit on another server", lambda: writer.first_after(started, address), 120)
        finally:
            cluster.kubectl("uncordon", node.name)
    elif kind == "cutoff":
        return cut_off_trial(cluster, namespace, primary, address, node, writer)
    elif kind == "nodelost":
        with nodes.node_fault("lose", node) as started:
            wait("a commit on another server", lambda: writer.first_after(started, address), 180)
    else:
        replicas = [i for i in cluster.status(namespace)["instances"] if i["name"] != primary]
        target = min(replicas, key=lambda i: i.get("lagBytes", 0))["name"]
        cluster.kubectl("annotate", "-n", namespace, "mydb", NAME, f"myapp.example.com/switchover-to={target}")
        wait("a commit on the target", lambda: writer.first_after(started, address), 120)
    first = writer.first_after(started, address)
    assert first is not None
    time.sleep(3)  # the commits right after the change, for the longest gap
    gap = primaries.unavailable(writer.writes(), started)
    # A deleted primary's pod that comes back at once is waited for (policy/primary.py): no failover then.
    moved_to = cluster.status(namespace).get("targetPrimary")
    return {
        "from": primary,
        "to": moved_to,
        "moved": moved_to != primary,
        "to_server": first.server,
        "first_commit_elsewhere": round(first.at - started, 2),
        "longest_gap": round(gap, 2),
    }


def cut_off_trial(
    cluster: Cluster, namespace: str, primary: str, address: str, node: Any, writer: primaries.Writer
) -> dict[str, Any]:
    """The primary's node cut off (its link down: the kill is never confirmed), a client on the node writing to
    the old primary over its unix socket. Figures: from the cut to the first commit through the Service on
    another server, to the old primary's last acknowledged write, and how many of its writes were acknowledged
    after the new primary's first (the lease's promise: none)."""
    postmaster = primaries.postgres_pid(cluster, namespace, primary)
    local = primaries.LocalWriter(postmaster)
    with nodes.node_fault("cut", node) as started:
        wait("a commit on another server", lambda: writer.first_after(started, address), 180)
        first = writer.first_after(started, address)
    local.stop()
    assert first is not None
    acknowledged = local.acknowledged()
    return {
        "from": primary,
        "to": cluster.status(namespace).get("targetPrimary"),
        "to_server": first.server,
        "first_commit_elsewhere": round(first.at - started, 2),
        "refused_writes_after": round(acknowledged[-1] - started, 2),
        "acknowledged_after_promotion": len([at for at in acknowledged if at > first.at]),
    }


def summary(trials: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    figures = {}
    figured = [(kind, kind, "longest_gap" if kind == "switchover" else "first_commit_elsewhere") for kind in trials]
    if "cutoff" in trials:
        figured.append(("cutoff-refused", "cutoff", "refused_writes_after"))
    for name, kind, key in figured:
        found = trials[kind]
        values = sorted(float(t[key]) for t in found)
        median = stats.percentile(values, 50)
        figures[name] = {
            "figure": key,
            "median": median,
            "min": values[0] if values else None,
            "max": values[-1] if values else None,
            "target": TARGETS[name],
            "met": median is not None and median <= TARGETS[name],
        }
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.failover", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5, help="trials of each kind (default 5)")
    parser.add_argument(
        "--kinds", default="hang,delete,lost,switchover,cutoff,nodelost", help="which kinds, comma-separated"
    )
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    parser.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a PostgreSQL parameter of the database (spec.postgresql.parameters), to try a setting; repeated",
    )
    ctx = parser.parse_args(argv)
    cluster_dir = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO / ".cluster"))
    registry = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    bins = bin_dir()
    cluster = Cluster(cluster_dir / "admin.kubeconfig", bins)
    logs = Path(ctx.out) / f"{stamp}-failover-logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.environ["MYDB_PLATFORM_CONFIG"] = str(platform_config(registry, Path(tempfile.mkdtemp(prefix="mydb-ha-"))))
    namespace = f"bench-failover-{stamp.lower()[:15]}"
    cluster.kubectl("create", "namespace", namespace)
    operator = OperatorProcess(
        cluster.kubeconfig,
        f"{bins}/helm",
        bins,
        logs / "operator.log",
        resync=10,  # a settled database (both replicas streaming) shows sooner between trials
        helm_parallel=Config().helm_parallel,
        rollout_window=16,
        extra_args=["--namespace", namespace, "--leader-elect=false"],
    )
    operator.start()
    kinds = [k for k in ctx.kinds.split(",") if k]
    trials: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    try:
        seed = yaml.safe_load((REPO / "examples" / "production-db.yaml").read_text())
        body = {
            "apiVersion": seed["apiVersion"],
            "kind": seed["kind"],
            "metadata": {"name": NAME},
            "spec": {"replicas": 3, "version": seed["spec"]["version"], "storage": "1Gi"},
        }
        if ctx.parameter:
            parameters = dict(item.split("=", 1) for item in ctx.parameter)
            body["spec"]["postgresql"] = {"parameters": parameters}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
        settled(cluster, namespace)
        for number in range(1, ctx.trials + 1):
            for kind in kinds:
                result = trial(cluster, namespace, kind)
                log(f"trial {number} {kind}: {result}")
                trials[kind].append(result)
    finally:
        cluster.kubectl("delete", "-n", namespace, "mydb", NAME, "--wait=true", "--timeout=120s", check=False)
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    figures = summary(trials)
    path = Path(ctx.out) / f"{stamp}-failover.json"
    path.write_text(json.dumps({"started": stamp, "trials": trials, "summary": figures}, indent=1))
    for kind, figure in figures.items():
        print(f"{kind:>10}: {figure}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
