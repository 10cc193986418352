"""Run the benchmark: for each size N, the operator's convergence and cost, the floor, then N hibernated databases.

    python -m bench --sizes 10,100,300 --idle 120          (make bench; BENCH_SIZES=10,100 make bench)

The control plane is hack/cluster.py's, one of its own (.cluster/bench, ports
from 16600; MYDB_CLUSTER_DIR and MYDB_CLUSTER_PORT_BASE choose another), so a
demo or a test run beside it is left alone; it is started when it is not
running, and stopped at the end only if this run started it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mydb_operator.config import Config

from . import apf, kube, report, stats
from .measure import START, log
from .process import REPO
from .setup import SA_NAME, SA_NAMESPACE, SCHEDULES, bin_dir, cluster_down, cluster_up, database, machine_facts
from .waves import run_floor, run_operator, run_scaled_to_zero


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        default=os.environ.get("BENCH_SIZES", "10,100"),
        help="comma-separated numbers of databases (env BENCH_SIZES; default 10,100; the full set: 10,100,300)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=float(os.environ.get("BENCH_IDLE", "70")),
        help="idle window in seconds, for the steady state (env BENCH_IDLE; default 70: one resync of 60 s)",
    )
    parser.add_argument("--resync", type=float, default=60.0, help="the operator's --resync (default 60)")
    parser.add_argument(
        "--parallel",
        type=int,
        default=Config().helm_parallel,
        help=f"the operator's Helm parallelism (default: the operator's own, {Config().helm_parallel})",
    )
    parser.add_argument(
        "--rollout-window",
        type=int,
        default=int(os.environ.get("MYDB_ROLLOUT_WINDOW", "16")),
        help="the operator's rollout window: new databases rolling out at once (default 16; 0: none)",
    )
    parser.add_argument("--timeout", type=float, help="seconds to wait for each wave (default 120 + 2 x N)")
    parser.add_argument("--settle", type=float, default=5.0, help="pause after convergence before the idle window")
    parser.add_argument("--cleanup-timeout", type=float, default=300.0, help="seconds to wait for a namespace to go")
    parser.add_argument("--sample-interval", type=float, default=0.15, help="memory sampling period (s)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (and a person with kubectl)")
    parser.add_argument("--no-kubectl-floor", action="store_true", help="skip a person with kubectl")
    parser.add_argument(
        "--floor-concurrency",
        type=int,
        default=16,
        help="the floor's server-side applies in flight from its one client (default 16)",
    )
    parser.add_argument(
        "--no-scaled-to-zero",
        action="store_true",
        help="skip the wave of hibernated databases (no pods, as in Flux's figures)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=int(os.environ.get("BENCH_RUNS", "1")),
        help="run every size this many times, each on a freshly started control plane "
        "(env BENCH_RUNS; default 1; the published figures use 3)",
    )
    parser.add_argument(
        "--only-scaled-to-zero",
        action="store_true",
        help="run only the scaled-to-zero wave and the restart (the N=1000 scale run)",
    )
    parser.add_argument(
        "--no-restart", action="store_true", help="skip the operator's restart over the scaled-to-zero databases"
    )
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    parser.add_argument(
        "--down", action="store_true", help="stop the control plane at the end even if it was running before"
    )
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in str(args.sizes).replace(" ", "").split(",") if s]
    return args


def prepare(ctx: argparse.Namespace, cluster_dir: Path) -> None:
    """The operator's ServiceAccount and the FlowSchemas on a running control plane; ctx.cluster, pids, meaning."""
    ctx.sa_kubeconfig = cluster_dir / "bench-operator.kubeconfig"
    subprocess.run(
        ["bash", str(REPO / "hack" / "install-dev.sh"), str(ctx.sa_kubeconfig)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ctx.cluster = kube.Cluster(cluster_dir)
    ctx.pids = ctx.cluster.component_pids()
    schemas, ctx.meaning = apf.flow_schemas(SA_NAMESPACE, SA_NAME)
    ctx.cluster.install_flow_schemas(schemas)
    log(f"installed {len(schemas)} FlowSchemas that count the operator's requests apart")


def run_sizes(ctx: argparse.Namespace, run_id: str, sizes: list[dict[str, Any]], save: Callable[[], None]) -> None:
    for n in ctx.sizes:
        size: dict[str, Any] = {"n": n}
        sizes.append(size)
        if ctx.only_scaled_to_zero:  # the scale runs: 1000 databases with pods would take the machine's hour
            run_zero(ctx, n, run_id, size)
            save()
            continue
        size["operator"] = run_operator(ctx, n, f"bench-{run_id}-op-{n}")
        if not ctx.no_floor:
            size["floor"] = run_floor(ctx, n, f"bench-{run_id}-floor-{n}", "ssa")
            size["ready_vs_floor"] = stats.ratio(
                size["operator"]["create"]["ready"]["all"], size["floor"]["pods_ready"]["all"]
            )
            if not ctx.no_kubectl_floor:
                size["kubectl_floor"] = run_floor(ctx, n, f"bench-{run_id}-kubectl-{n}", "kubectl")
        if not ctx.no_scaled_to_zero:  # last: the operator and floor waves compare as before
            run_zero(ctx, n, run_id, size)
        save()


def run_zero(ctx: argparse.Namespace, n: int, run_id: str, size: dict[str, Any]) -> None:
    """N hibernated databases through the operator, then (unless --no-floor) the same objects applied
    with no operator: what the control plane alone takes for them."""
    size["scaled_to_zero"] = run_scaled_to_zero(ctx, n, f"bench-{run_id}-zero-{n}")
    if not ctx.no_floor:
        size["zero_floor"] = run_floor(ctx, n, f"bench-{run_id}-zero-floor-{n}", "ssa", hibernate=True)


def main(argv: list[str] | None = None) -> None:
    ctx = parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(ctx.out)
    ctx.logs = out_dir / f"{stamp}-logs"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    # Every subprocess (hack/cluster.py, hack/install-dev.sh, the operator) inherits these.
    os.environ.setdefault("MYDB_CLUSTER_DIR", str(REPO / ".cluster" / "bench"))
    os.environ.setdefault("MYDB_CLUSTER_PORT_BASE", "16600")
    cluster_dir = Path(os.environ["MYDB_CLUSTER_DIR"])
    log(
        f"sizes {ctx.sizes} x {ctx.runs} run(s), idle {ctx.idle:.0f}s, resync {ctx.resync:.0f}s, helm parallel "
        f"{ctx.parallel}, rollout window {ctx.rollout_window}; control plane {cluster_dir}"
    )
    if ctx.idle < ctx.resync:
        log(
            f"note: the idle window ({ctx.idle:.0f}s) is shorter than the resync ({ctx.resync:.0f}s): "
            "it may see no periodic reconcile at all"
        )
    ctx.bins = bin_dir()
    results: dict[str, Any] = {
        "started": stamp,
        "settings": {
            "sizes": ctx.sizes,
            "runs": ctx.runs,
            "idle_seconds": ctx.idle,
            "resync_seconds": ctx.resync,
            "helm_parallel": ctx.parallel,
            "rollout_window": ctx.rollout_window,
            "floor_concurrency": ctx.floor_concurrency,
            "settle_seconds": ctx.settle,
            "database": database("NAME", SCHEDULES[0])["spec"],
            "update": {"spec.backup.schedule": SCHEDULES[1]},
            "cluster_dir": str(cluster_dir),
        },
        "runs": [],
    }
    path = out_dir / f"{stamp}.json"

    def save() -> None:
        path.write_text(json.dumps(results, indent=1))

    started_cluster = False
    try:
        for index in range(ctx.runs):
            if ctx.runs > 1:  # each run on a freshly started control plane, so runs compare
                log(f"run {index + 1} of {ctx.runs}: starting the control plane afresh")
                cluster_down()
            started_cluster = cluster_up() or started_cluster
            prepare(ctx, cluster_dir)
            results.setdefault("machine", machine_facts(ctx.cluster, ctx.bins))
            run: dict[str, Any] = {"run": index + 1, "sizes": []}
            results["runs"].append(run)
            run_sizes(ctx, f"{stamp[9:15].lower()}-{index + 1}", run["sizes"], save)
    finally:
        results.setdefault("machine", {})["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        results["targets"] = report.targets(results)
        results["elapsed_seconds"] = round(time.monotonic() - START, 1)
        save()
        try:
            ctx.cluster.remove_flow_schemas("app.kubernetes.io/part-of=mydb-bench")
        except Exception as error:
            log(f"could not remove the FlowSchemas: {error}")
        if started_cluster or ctx.down:
            log("stopping the control plane this run started")
            cluster_down()
    print()
    print(report.tables(results))
    log(f"results: {path}")
