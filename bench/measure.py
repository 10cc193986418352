"""Measuring a wave: counters read before and after, waiting for goals, per-database latencies."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from . import apf, kube, prom
from .process import OperatorProcess, component_cpu, own_children_cpu

START = time.monotonic()


def log(message: str) -> None:
    print(f"[bench {time.monotonic() - START:6.1f}s] {message}", flush=True)


class Snapshot:
    """Every counter the benchmark diffs, read at one moment."""

    def __init__(self, cluster: kube.Cluster, operator: OperatorProcess | None, pids: dict[str, int]):
        self.t = time.monotonic()
        self.apiserver = cluster.apiserver_metrics()
        self.operator = operator.metrics() if operator else {}
        self.cpu = operator.cpu() if operator else {}
        self.components = component_cpu(pids)
        self.children = own_children_cpu()
        own = psutil.Process().cpu_times()
        self.harness = own.user + own.system


def window(before: Snapshot, after: Snapshot, meaning: dict[str, tuple[str, str]], n: int) -> dict[str, Any]:
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
        "observations": {
            source: round(count)
            for source, count in prom.by_label(op_delta, "mydb_observations_total", "source").items()
        },
        "operator_api": {
            "reads": round(op_reads),
            "writes": round(op_writes),
            "lease_writes": round(apf.lease_writes(operator_requests)),
            "reads_per_db": round(op_reads / n, 2),
            "writes_per_db": round(op_writes / n, 2),
            "writes_per_db_by_kind": {
                kind: round(count / n, 2) for kind, count in apf.writes_by_kind(operator_requests).items()
            },
            "by_verb": _rounded(operator_requests),
        },
        "all_clients_api": {
            "reads": round(all_reads),
            "writes": round(all_writes),
            "by_verb": _rounded(all_requests),
            "note": "every client: operator + Helm + kube-controller-manager + scheduler + kwok "
            "+ this harness; WATCHes count when they end",
        },
        "cpu_seconds": {
            "operator": round(after.cpu.get("operator", 0) - before.cpu.get("operator", 0), 2),
            "helm": round(after.cpu.get("helm", 0) - before.cpu.get("helm", 0), 2),
            **{
                name: round(after.components.get(name, 0) - before.components.get(name, 0), 2)
                for name in after.components
            },
        },
    }


def _rounded(by_verb: dict[str, dict[str, float]]) -> dict[str, dict[str, int]]:
    return {
        verb: {res: round(n) for res, n in sorted(resources.items())} for verb, resources in sorted(by_verb.items())
    }


def wait_goals(what: str, goals: list[tuple[kube.Tracker, str, str]], n: int, timeout: float) -> bool:
    """Wait until every goal is met for all n keys; a progress line every 5 s. False on timeout."""
    return wait_counts(
        what, [(title, functools.partial(_met_count, tracker, goal)) for tracker, goal, title in goals], n, timeout
    )


def _met_count(tracker: kube.Tracker, goal: str) -> int:
    return len(tracker.met(goal))


def wait_counts(what: str, counters: list[tuple[str, Callable[[], int]]], n: int, timeout: float) -> bool:
    """Wait until every counter reaches n; a progress line every 5 s. False on timeout."""
    started = time.monotonic()
    last = started
    while True:
        counts = [(title, count()) for title, count in counters]
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
def latencies(tracker: kube.Tracker, goal: str, t0: float) -> dict[str, float]:
    return {key: t - t0 for key, t in tracker.met(goal).items()}


def in_parallel(call: Callable[[str], Any], names: list[str], workers: int = 8) -> None:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(call, names))
