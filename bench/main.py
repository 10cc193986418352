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
import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import psutil

from . import apf, floor, kube, prom, report, stats
from .process import REPO, OperatorProcess, Sampler, component_cpu, own_children_cpu

START = time.monotonic()
SA_NAMESPACE, SA_NAME = "mydb-system", "mydb-operator"  # what hack/install-dev.sh installs
SCHEDULES = ("30 4 29 2 *", "45 4 29 2 *")  # Feb 29 only: no backup Job fires during a run
MERGE = "application/merge-patch+json"


def log(message: str) -> None:
    print(f"[bench {time.monotonic() - START:6.1f}s] {message}", flush=True)


# ------------------------------------------------------------------ setup


def bin_dir() -> str:
    out = subprocess.run(["bash", str(REPO / "hack" / "build-tools.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
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
    subprocess.run([sys.executable, str(REPO / "hack" / "cluster.py"), "down"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def machine_facts(cluster: kube.Cluster, bins: str) -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    def run(*args: str) -> str:
        result = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
        return result.stdout.strip() if result.returncode == 0 else "?"

    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor() or "?")
    dirty = run("git", "status", "--porcelain", "--untracked-files=no")
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gb": round(psutil.virtual_memory().total / 1024 ** 3, 1),
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


def database(name: str, schedule: str, hibernate: bool = False) -> dict:
    spec = {"replicas": 3, "version": "15.2", "storage": "1Gi", "backup": {"schedule": schedule}}
    if hibernate:
        spec["hibernate"] = True  # StatefulSet at 0 replicas: no pod to schedule or wait for
    return {"apiVersion": f"{kube.GROUP}/{kube.VERSION}", "kind": kube.KIND, "metadata": {"name": name},
            "spec": spec}


# --------------------------------------------------------------- measuring


class Snapshot:
    """Every counter the benchmark diffs, read at one moment."""

    def __init__(self, cluster: kube.Cluster, operator: OperatorProcess | None, pids: dict[str, int]):
        self.t = time.monotonic()
        self.apiserver = cluster.apiserver_metrics()
        self.operator = operator.metrics() if operator else {}
        self.cpu = operator.cpu() if operator else {}
        self.components = component_cpu(pids)
        self.children = own_children_cpu()


def window(before: Snapshot, after: Snapshot, meaning: dict, n: int) -> dict[str, Any]:
    """What happened between two snapshots: Helm runs, API requests (the operator's and all), CPU."""
    op_delta = prom.diff(after.operator, before.operator)
    api_delta = prom.diff(after.apiserver, before.apiserver)
    operator_requests = apf.operator_requests(api_delta, meaning)
    op_reads, op_writes = apf.reads_writes(operator_requests)
    all_requests = prom.requests_by_verb_resource(api_delta)
    all_reads, all_writes = prom.split_reads_writes(all_requests)
    helm_runs = prom.by_label(op_delta, "mydb_helm_invocations_total", "command")
    return {
        "seconds": round(after.t - before.t, 2),
        "helm_runs": round(sum(helm_runs.values())),
        "helm_runs_by_command": {k: round(v) for k, v in helm_runs.items()},
        "helm_failures": round(prom.total(op_delta, "mydb_helm_invocations_total", result="error")),
        "reconciles": round(prom.total(op_delta, "mydb_reconciles_total")),
        "status_patches": round(prom.total(op_delta, "mydb_status_patches_total")),
        "observations": {source: round(count) for source, count
                         in prom.by_label(op_delta, "mydb_observations_total", "source").items()},
        "operator_api": {"reads": round(op_reads), "writes": round(op_writes),
                         "lease_writes": round(apf.lease_writes(operator_requests)),
                         "reads_per_db": round(op_reads / n, 2), "writes_per_db": round(op_writes / n, 2),
                         "by_verb": _rounded(operator_requests)},
        "all_clients_api": {"reads": round(all_reads), "writes": round(all_writes), "by_verb": _rounded(all_requests),
                            "note": "every client: operator + Helm + kube-controller-manager + scheduler + kwok "
                                    "+ this harness; WATCHes count when they end"},
        "cpu_seconds": {
            "operator": round(after.cpu.get("operator", 0) - before.cpu.get("operator", 0), 2),
            "helm": round(after.cpu.get("helm", 0) - before.cpu.get("helm", 0), 2),
            **{name: round(after.components.get(name, 0) - before.components.get(name, 0), 2)
               for name in after.components},
        },
    }


def _rounded(by_verb: dict[str, dict[str, float]]) -> dict[str, dict[str, int]]:
    return {verb: {res: round(n) for res, n in sorted(resources.items())} for verb, resources in sorted(by_verb.items())}


def wait_goals(what: str, goals: list[tuple[kube.Tracker, str, str]], n: int, timeout: float) -> bool:
    """Wait until every goal is met for all n keys; a progress line every 5 s. False on timeout."""
    started = time.monotonic()
    last = started
    while True:
        counts = [(title, len(tracker.met(goal))) for tracker, goal, title in goals]
        if all(count >= n for _, count in counts):
            return True
        now = time.monotonic()
        if now - started > timeout:
            log(f"{what}: TIMEOUT after {timeout:.0f}s: " + ", ".join(f"{t} {c}/{n}" for t, c in counts))
            return False
        if now - last >= 5:
            last = now
            log(f"{what} {now - started:5.1f}s: " + ", ".join(f"{t} {c}/{n}" for t, c in counts))
        time.sleep(0.2)


# MyDatabases (kopf) and the six informers of cluster/informers.py
WATCHED = ("mydatabases", "pods", "services", "persistentvolumeclaims", "statefulsets", "cronjobs", "jobs")


def wait_watching(cluster: kube.Cluster, before: prom.Samples, meaning: dict, timeout: float = 60) -> None:
    """Wait until the operator has opened its watches, so that start-up is not counted as the create wave."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watches = apf.operator_requests(prom.diff(cluster.apiserver_metrics(), before), meaning).get("watch", {})
        if all(watches.get(kind) for kind in WATCHED):
            return
        time.sleep(0.5)
    log(f"the operator did not open all its watches within {timeout:.0f}s; going on")


def start_operator(ctx: argparse.Namespace, log_name: str) -> OperatorProcess:
    """The operator as a child process, once it watches everything (start-up is not part of a wave)."""
    # Leader election is on by default; its Lease goes where that ServiceAccount may write one.
    operator = OperatorProcess(ctx.sa_kubeconfig, f"{ctx.bins}/helm", ctx.bins, ctx.logs / log_name,
                               resync=ctx.resync, helm_parallel=ctx.parallel,
                               extra_args=["--leader-lease-namespace", SA_NAMESPACE])
    started = ctx.cluster.apiserver_metrics()
    operator.start()
    wait_watching(ctx.cluster, started, ctx.meaning)
    return operator


def latencies(tracker: kube.Tracker, goal: str, t0: float) -> dict[str, float]:
    return {key: t - t0 for key, t in tracker.met(goal).items()}


def in_parallel(call: Callable[[str], Any], names: list[str], workers: int = 8) -> None:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(call, names))


# ------------------------------------------------------------ one size


def run_operator(ctx: argparse.Namespace, n: int, namespace: str) -> dict[str, Any]:
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    crs, releases, sets = kube.Tracker(kube.by_name), kube.Tracker(kube.by_helm_release), kube.Tracker(kube.by_name)
    watches = [
        kube.start_watch(functools.partial(cluster.custom.list_namespaced_custom_object, kube.GROUP, kube.VERSION,
                                           namespace, kube.PLURAL), crs),
        kube.start_watch(functools.partial(cluster.core.list_namespaced_config_map, namespace), releases, "owner=helm"),
        kube.start_watch(functools.partial(cluster.apps.list_namespaced_stateful_set, namespace), sets),
    ]
    result: dict[str, Any] = {"namespace": namespace}
    operator = sampler = None
    try:
        operator = start_operator(ctx, f"operator-{n}.log")
        sampler = Sampler(operator.pid, interval=ctx.sample_interval)
        sampler.start()
        log(f"N={n}: operator started and watching (pid {operator.pid}, metrics :{operator.metrics_port}, "
            f"resync {ctx.resync:.0f}s)")
        timeout = ctx.timeout or 120 + 2.0 * n

        # --- create N at once
        crs.add_goal("ready", lambda k, o: kube.cr_ready(o, 1))
        crs.add_goal("reported", lambda k, o: kube.cr_revision(o) >= 1)
        releases.add_goal("deployed", lambda k, o: kube.helm_release_deployed(o, 1))
        sets.add_goal("pods", lambda k, o: kube.statefulset_ready(o))
        before = Snapshot(cluster, operator, ctx.pids)
        sampler.phase = "create"
        log(f"N={n}: creating {n} MyDatabases in {namespace}")
        t0 = time.monotonic()
        created: dict[str, float] = {}

        def create(name: str) -> None:
            cluster.custom.create_namespaced_custom_object(kube.GROUP, kube.VERSION, namespace, kube.PLURAL,
                                                           database(name, SCHEDULES[0]))
            created[name] = time.monotonic() - t0
        in_parallel(create, names)
        log(f"N={n}: {n} created in {max(created.values()):.1f}s; waiting for Ready (timeout {timeout:.0f}s)")
        converged = wait_goals(f"N={n} create", [(releases, "deployed", "deployed"), (sets, "pods", "pods ready"),
                                                 (crs, "ready", "Ready")], n, timeout)
        after = Snapshot(cluster, operator, ctx.pids)
        result["create"] = {
            "converged": converged,
            "create_calls_seconds": round(max(created.values()), 2),
            "deployed": stats.summary(latencies(releases, "deployed", t0), n),
            "reported": stats.summary(latencies(crs, "reported", t0), n),
            "pods_ready": stats.summary(latencies(sets, "pods", t0), n),
            "ready": stats.summary(latencies(crs, "ready", t0), n),
            **window(before, after, ctx.meaning, n),
        }
        log(f"N={n}: create: " + report.one_line(result["create"]))

        # --- steady state
        sampler.phase = "settle"
        time.sleep(ctx.settle)
        before = Snapshot(cluster, operator, ctx.pids)
        sampler.phase = "idle"
        log(f"N={n}: idle window of {ctx.idle:.0f}s (resync {ctx.resync:.0f}s)")
        idle_end = time.monotonic() + ctx.idle
        while time.monotonic() < idle_end:
            time.sleep(min(30.0, max(0.0, idle_end - time.monotonic())))
            if time.monotonic() < idle_end - 1:
                log(f"N={n}: idle, {idle_end - time.monotonic():.0f}s to go")
        after = Snapshot(cluster, operator, ctx.pids)
        result["idle"] = window(before, after, ctx.meaning, n)
        result["idle"]["resyncs_expected_per_db"] = int(ctx.idle // ctx.resync)
        log(f"N={n}: idle: {result['idle']['helm_runs']} helm runs, {result['idle']['operator_api']['writes']} "
            f"operator API writes, {result['idle']['operator_api']['reads']} reads, "
            f"{result['idle']['reconciles']} reconciles")

        # --- update wave: one field on all N
        base = {name: kube.cr_revision(obj) for name, obj in crs.snapshot().items()}
        crs.add_goal("updated", lambda k, o: kube.cr_ready(o, base.get(k, 0) + 1))
        crs.add_goal("update-reported", lambda k, o: kube.cr_revision(o) >= base.get(k, 0) + 1)
        releases.add_goal("update-deployed", lambda k, o: kube.helm_release_deployed(o, base.get(k, 0) + 1))
        before = Snapshot(cluster, operator, ctx.pids)
        sampler.phase = "update"
        log(f"N={n}: update wave: spec.backup.schedule on all {n}")
        t0 = time.monotonic()
        in_parallel(lambda name: cluster.custom.patch_namespaced_custom_object(
            kube.GROUP, kube.VERSION, namespace, kube.PLURAL, name, {"spec": {"backup": {"schedule": SCHEDULES[1]}}},
            _content_type=MERGE), names)
        converged = wait_goals(f"N={n} update", [(releases, "update-deployed", "deployed"),
                                                 (crs, "updated", "Ready")], n, timeout)
        after = Snapshot(cluster, operator, ctx.pids)
        result["update"] = {
            "converged": converged,
            "deployed": stats.summary(latencies(releases, "update-deployed", t0), n),
            "reported": stats.summary(latencies(crs, "update-reported", t0), n),
            "ready": stats.summary(latencies(crs, "updated", t0), n),
            **window(before, after, ctx.meaning, n),
        }
        log(f"N={n}: update: " + report.one_line(result["update"]))
    finally:
        if sampler:
            sampler.stop()
            result["memory"] = {"overall": sampler.overall.as_dict(),
                                **{phase: peaks.as_dict() for phase, peaks in sampler.peaks.items()},
                                "series": sampler.series}
        for watch in watches:
            watch.stop()
        if operator:
            operator.stop()
            result["operator_tracebacks"] = operator.tracebacks() if operator.log_path.exists() else None
            result["operator_log"] = str(operator.log_path)
        log(f"N={n}: operator stopped; deleting {namespace}")
        cluster.strip_finalizers(namespace)
        result["cleanup_ok"] = cluster.delete_namespace(namespace, ctx.cleanup_timeout, log)
    return result


def run_scaled_to_zero(ctx: argparse.Namespace, n: int, namespace: str) -> dict[str, Any]:
    """N hibernated databases at once: every release and claim, no pod. Flux's published
    figures are for apps scaled to zero, so this is the wave to hold them against."""
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    crs, releases = kube.Tracker(kube.by_name), kube.Tracker(kube.by_helm_release)
    watches = [
        kube.start_watch(functools.partial(cluster.custom.list_namespaced_custom_object, kube.GROUP, kube.VERSION,
                                           namespace, kube.PLURAL), crs),
        kube.start_watch(functools.partial(cluster.core.list_namespaced_config_map, namespace), releases, "owner=helm"),
    ]
    result: dict[str, Any] = {"namespace": namespace}
    operator = None
    try:
        operator = start_operator(ctx, f"operator-{n}-scaled-to-zero.log")
        crs.add_goal("hibernated", lambda k, o: kube.cr_hibernated(o))
        releases.add_goal("deployed", lambda k, o: kube.helm_release_deployed(o, 1))
        before = Snapshot(cluster, operator, ctx.pids)
        log(f"N={n}: scaled to zero: creating {n} hibernated MyDatabases in {namespace}")
        t0 = time.monotonic()
        in_parallel(lambda name: cluster.custom.create_namespaced_custom_object(
            kube.GROUP, kube.VERSION, namespace, kube.PLURAL, database(name, SCHEDULES[0], hibernate=True)), names)
        converged = wait_goals(f"N={n} scaled to zero", [(releases, "deployed", "deployed"),
                                                         (crs, "hibernated", "Hibernated")],
                               n, ctx.timeout or 120 + 2.0 * n)
        after = Snapshot(cluster, operator, ctx.pids)
        result.update({
            "converged": converged,
            "deployed": stats.summary(latencies(releases, "deployed", t0), n),
            "hibernated": stats.summary(latencies(crs, "hibernated", t0), n),
            **window(before, after, ctx.meaning, n),
        })
        log(f"N={n}: scaled to zero: deployed all {result['deployed']['all']}s, "
            f"Hibernated all {result['hibernated']['all']}s")
    finally:
        for watch in watches:
            watch.stop()
        if operator:
            operator.stop()
            result["operator_tracebacks"] = operator.tracebacks() if operator.log_path.exists() else None
        cluster.strip_finalizers(namespace)
        result["cleanup_ok"] = cluster.delete_namespace(namespace, ctx.cleanup_timeout, log)
    return result


def run_floor(ctx: argparse.Namespace, n: int, namespace: str) -> dict[str, Any]:
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    sets = kube.Tracker(kube.by_name)
    watch = kube.start_watch(functools.partial(cluster.apps.list_namespaced_stateful_set, namespace), sets)
    env = floor.render_env(f"{ctx.bins}/helm", ctx.bins, ctx.logs / "render-home")
    try:
        rendered, how = floor.render_wave([database(name, SCHEDULES[0]) for name in names], namespace, env,
                                          ctx.logs / "floor", log)
        sets.add_goal("pods", lambda k, o: kube.statefulset_ready(o))
        before = Snapshot(cluster, None, ctx.pids)
        log(f"N={n}: floor: kubectl apply --server-side of {n} x {how['objects_per_database']} objects, "
            f"{ctx.parallel} at a time, in {namespace}")
        t0 = time.monotonic()
        finished, errors = floor.apply_wave(rendered, namespace, f"{ctx.bins}/kubectl", cluster.kubeconfig,
                                            ctx.parallel, env)
        for name, error in list(errors.items())[:3]:
            log(f"N={n}: floor: apply of {name} failed: {error}")
        log(f"N={n}: floor: applied in {max(finished.values()) - t0:.1f}s; waiting for pods")
        converged = wait_goals(f"N={n} floor", [(sets, "pods", "pods ready")], n, ctx.timeout or 120 + 2.0 * n)
        after = Snapshot(cluster, None, ctx.pids)
        out = {
            "converged": converged and not errors,
            "apply_errors": len(errors),
            **how,
            "applied": stats.summary({k: t - t0 for k, t in finished.items()}, n),
            "pods_ready": stats.summary(latencies(sets, "pods", t0), n),
            "kubectl_cpu_seconds": round(after.children - before.children, 2),
            "api": {k: v for k, v in window(before, after, ctx.meaning, n).items()
                    if k in ("all_clients_api", "cpu_seconds")},
        }
        log(f"N={n}: floor: all pods ready in {out['pods_ready']['all']}s "
            f"(p50 {out['pods_ready']['p50']}s, p95 {out['pods_ready']['p95']}s)")
        return out
    finally:
        watch.stop()
        log(f"N={n}: deleting {namespace}")
        ok = cluster.delete_namespace(namespace, ctx.cleanup_timeout, log)
        if not ok:
            log(f"N={n}: {namespace} still terminating after {ctx.cleanup_timeout:.0f}s; going on")


# ------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "10,100"),
                        help="comma-separated numbers of databases (env BENCH_SIZES; default 10,100; the issue's full set is 10,100,300)")
    parser.add_argument("--idle", type=float, default=float(os.environ.get("BENCH_IDLE", "70")),
                        help="idle window in seconds, for the steady state (env BENCH_IDLE; default 70: one resync of 60 s)")
    parser.add_argument("--resync", type=float, default=60.0, help="the operator's --resync (default 60)")
    parser.add_argument("--parallel", type=int, default=int(os.environ.get("MYDB_HELM_PARALLEL", "4")),
                        help="the operator's Helm parallelism, and the floor's kubectl concurrency (default 4)")
    parser.add_argument("--timeout", type=float, help="seconds to wait for each wave (default 120 + 2 x N)")
    parser.add_argument("--settle", type=float, default=5.0, help="pause after convergence before the idle window")
    parser.add_argument("--cleanup-timeout", type=float, default=300.0, help="seconds to wait for a namespace to go")
    parser.add_argument("--sample-interval", type=float, default=0.15, help="memory sampling period (s)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor")
    parser.add_argument("--no-scaled-to-zero", action="store_true",
                        help="skip the wave of hibernated databases (no pods, as in Flux's figures)")
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    parser.add_argument("--down", action="store_true",
                        help="stop the control plane at the end even if it was running before")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in str(args.sizes).replace(" ", "").split(",") if s]
    return args


def main(argv: list[str] | None = None) -> None:
    ctx = parse_args(argv)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(ctx.out)
    ctx.logs = out_dir / f"{stamp}-logs"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    # Every subprocess (hack/cluster.py, hack/install-dev.sh, the operator) inherits these.
    os.environ.setdefault("MYDB_CLUSTER_DIR", str(REPO / ".cluster" / "bench"))
    os.environ.setdefault("MYDB_CLUSTER_PORT_BASE", "16600")
    cluster_dir = Path(os.environ["MYDB_CLUSTER_DIR"])
    log(f"sizes {ctx.sizes}, idle {ctx.idle:.0f}s, resync {ctx.resync:.0f}s, helm parallel {ctx.parallel}; "
        f"control plane {cluster_dir}")
    if ctx.idle < ctx.resync:
        log(f"note: the idle window ({ctx.idle:.0f}s) is shorter than the resync ({ctx.resync:.0f}s): "
            "it may see no periodic reconcile at all")
    ctx.bins = bin_dir()
    started_cluster = cluster_up()
    ctx.sa_kubeconfig = cluster_dir / "bench-operator.kubeconfig"
    subprocess.run(["bash", str(REPO / "hack" / "install-dev.sh"), str(ctx.sa_kubeconfig)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx.cluster = kube.Cluster(cluster_dir)
    ctx.pids = ctx.cluster.component_pids()
    schemas, ctx.meaning = apf.flow_schemas(SA_NAMESPACE, SA_NAME)
    ctx.cluster.install_flow_schemas(schemas)
    log(f"installed {len(schemas)} FlowSchemas that count the operator's requests apart")
    results: dict[str, Any] = {
        "started": stamp,
        "machine": machine_facts(ctx.cluster, ctx.bins),
        "settings": {"sizes": ctx.sizes, "idle_seconds": ctx.idle, "resync_seconds": ctx.resync,
                     "helm_parallel": ctx.parallel, "settle_seconds": ctx.settle,
                     "database": database("NAME", SCHEDULES[0])["spec"],
                     "update": {"spec.backup.schedule": SCHEDULES[1]}, "cluster_dir": str(cluster_dir)},
        "sizes": [],
    }
    run_id = stamp[9:15].lower()
    path = out_dir / f"{stamp}.json"
    try:
        for n in ctx.sizes:
            size: dict[str, Any] = {"n": n}
            results["sizes"].append(size)
            size["operator"] = run_operator(ctx, n, f"bench-{run_id}-op-{n}")
            if not ctx.no_floor:
                size["floor"] = run_floor(ctx, n, f"bench-{run_id}-floor-{n}")
                size["ready_vs_floor"] = stats.ratio(size["operator"]["create"]["ready"]["all"],
                                                     size["floor"]["pods_ready"]["all"])
            if not ctx.no_scaled_to_zero:  # last: the operator and floor waves compare as before
                size["scaled_to_zero"] = run_scaled_to_zero(ctx, n, f"bench-{run_id}-zero-{n}")
            path.write_text(json.dumps(results, indent=1))
    finally:
        results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        results["targets"] = report.targets(results)
        results["elapsed_seconds"] = round(time.monotonic() - START, 1)
        path.write_text(json.dumps(results, indent=1))
        try:
            ctx.cluster.remove_flow_schemas("app.kubernetes.io/part-of=mydb-bench")
        except Exception as error:  # noqa: BLE001
            log(f"could not remove the FlowSchemas: {error}")
        if started_cluster or ctx.down:
            log("stopping the control plane this run started")
            cluster_down()
    print()
    print(report.tables(results))
    log(f"results: {path}")
