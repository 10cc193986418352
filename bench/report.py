"""Readable tables and the issue's targets, from the results dict (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import stats

# The targets of the issue "Performance: beat the closest peer on every clock, and scale to 1000
# databases", at N=100 on 2 cores unless said; each must hold in every run.
STS_READY_P50, STS_READY_ALL = 30.0, 50.0
WRITES_PER_DB = 14.0
APISERVER_CPU = 40.0
DELETE_ALL, DELETE_CPU = 12.0, 8.0
SPREAD = 0.15
READY_VS_FLOOR = 1.2
ZERO_1000_DEPLOYED = 150.0
PSS_1000_MB = 250.0
CPU_PER_DB_GROWTH = 1.2
# The clocks whose spread between runs is judged.
CLOCKS = ("deployed_all", "sts_ready_all", "sts_ready_p50", "ready_all", "delete_all")


def _s(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def one_line(wave: dict[str, Any]) -> str:
    ready = wave["ready"]
    deployed = wave["deployed"]
    return (
        f"deployed all {_s(deployed['all'])}s; Ready p50 {_s(ready['p50'])}s p95 {_s(ready['p95'])}s "
        f"max {_s(ready['max'])}s ({ready['count']}/{ready['expected']}); {wave['helm_runs']} helm runs; "
        f"operator API {wave['operator_api']['reads']} reads {wave['operator_api']['writes']} writes; "
        f"operator CPU {wave['cpu_seconds']['operator']}s, helm CPU {wave['cpu_seconds']['helm']}s"
    )


def get_all(wave: dict[str, Any], key: str) -> Any:
    """The `all` of a summary that older results may not have."""
    return (wave.get(key) or {}).get("all")


def delete_line(wave: dict[str, Any]) -> str:
    gone = wave["gone"]
    return (
        f"all gone {_s(gone['all'])}s (p50 {_s(gone['p50'])}s; CRs {_s(wave['crs_gone']['all'])}s, releases "
        f"{_s(wave['releases_gone']['all'])}s, StatefulSets {_s(get_all(wave, 'statefulsets_gone'))}s); "
        f"{wave['helm_runs']} helm runs; operator API "
        f"{wave['operator_api']['reads']} reads {wave['operator_api']['writes']} writes; "
        f"operator CPU {wave['cpu_seconds']['operator']}s, helm CPU {wave['cpu_seconds']['helm']}s"
    )


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_s(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def per_db(cpu: dict[str, Any] | None, n: int) -> float | None:
    """The operator's CPU (process + Helm children) per database, from a wave's cpu_seconds."""
    if not cpu:
        return None
    return round(((cpu.get("operator") or 0) + (cpu.get("helm") or 0)) / n, 3)


def measures(size: dict[str, Any]) -> dict[str, Any]:
    """One size of one run as the issue's measures (None where the wave did not run)."""
    op = size.get("operator") or {}
    create, idle, delete = op.get("create") or {}, op.get("idle") or {}, op.get("delete") or {}
    zero = size.get("scaled_to_zero") or {}
    restart = zero.get("restart") or {}
    n = size["n"]

    def get(d: Any, *path: str) -> Any:
        for key in path:
            d = d.get(key) if isinstance(d, dict) else None
        return d

    cpu = get(create, "cpu_seconds") or {}
    delete_cpu = get(delete, "cpu_seconds") or {}
    return {
        "deployed_all": get(create, "deployed", "all"),
        "sts_ready_all": get(create, "pods_ready", "all"),
        "sts_ready_p50": get(create, "pods_ready", "p50"),
        "ready_all": get(create, "ready", "all"),
        "operator_cpu": cpu.get("operator"),
        "helm_cpu": cpu.get("helm"),
        "cpu_per_db": per_db(cpu, n),
        "reads": get(create, "operator_api", "reads"),
        "writes": get(create, "operator_api", "writes"),
        "writes_per_db": get(create, "operator_api", "writes_per_db"),
        "writes_per_db_by_kind": get(create, "operator_api", "writes_per_db_by_kind"),
        "apiserver_cpu": cpu.get("kube-apiserver"),
        "peak_pss_mb": get(op, "memory", "overall", "tree_pss_mb"),
        "idle_cpu": get(idle, "cpu_seconds", "operator"),
        "idle_writes": get(idle, "operator_api", "writes"),
        "idle_helm_runs": get(idle, "helm_runs"),
        "delete_all": get(delete, "gone", "all"),
        "delete_statefulsets_all": get(delete, "statefulsets_gone", "all"),
        "delete_cpu": round((delete_cpu.get("operator") or 0) + (delete_cpu.get("helm") or 0), 2)
        if delete_cpu
        else None,
        "delete_requests": (get(delete, "operator_api", "reads") or 0) + (get(delete, "operator_api", "writes") or 0)
        if delete
        else None,
        "floor_all": get(size, "floor", "pods_ready", "all"),
        "ready_vs_floor": size.get("ready_vs_floor"),
        "kubectl_floor_all": get(size, "kubectl_floor", "pods_ready", "all"),
        "zero_deployed_all": get(zero, "deployed", "all"),
        "zero_peak_pss_mb": get(zero, "memory", "overall", "tree_pss_mb"),
        "zero_cpu_per_db": per_db(get(zero, "cpu_seconds"), n),
        "zero_apiserver_cpu": get(zero, "cpu_seconds", "kube-apiserver"),
        "zero_floor_all": get(size, "zero_floor", "applied", "all"),
        "zero_vs_floor": stats.ratio(get(zero, "deployed", "all"), get(size, "zero_floor", "applied", "all")),
        "zero_floor_apiserver_cpu": get(size, "zero_floor", "api", "cpu_seconds", "kube-apiserver"),
        "restart_seconds": get(restart, "confirmed_all_seconds"),
        "restart_helm_runs": get(restart, "helm_runs"),
        "restart_reads": get(restart, "operator_api", "reads"),
    }


def by_size(results: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """{N: [the measures of each run]}."""
    out: dict[int, list[dict[str, Any]]] = {}
    for run in results.get("runs", []):
        for size in run["sizes"]:
            out.setdefault(size["n"], []).append(measures(size))
    return out


ROWS = (  # (measure, title) for the summary, in the order
    ("deployed_all", "all releases deployed (s)"),
    ("sts_ready_all", "all StatefulSets with their pods ready (s)"),
    ("sts_ready_p50", "StatefulSets ready, p50 (s)"),
    ("ready_all", "all MyDatabases Ready (s)"),
    ("operator_cpu", "operator CPU in the create wave, process (s)"),
    ("helm_cpu", "operator CPU in the create wave, Helm children (s)"),
    ("reads", "operator API reads in the create wave"),
    ("writes", "operator API writes in the create wave"),
    ("writes_per_db", "writes per database"),
    ("apiserver_cpu", "kube-apiserver CPU in the create wave (s)"),
    ("peak_pss_mb", "peak PSS of the operator's process tree (MB)"),
    ("idle_cpu", "idle: operator CPU (s)"),
    ("idle_writes", "idle: operator API writes"),
    ("idle_helm_runs", "idle: Helm runs"),
    ("delete_all", "delete all: CRs and releases gone (s)"),
    ("delete_statefulsets_all", "delete all: StatefulSets gone (s)"),
    ("delete_cpu", "delete: operator CPU, process + Helm (s)"),
    ("delete_requests", "delete: operator API requests"),
    ("floor_all", "floor (one client, server-side apply): pods ready all (s)"),
    ("ready_vs_floor", "Ready / floor"),
    ("kubectl_floor_all", "a person with kubectl: pods ready all (s)"),
    ("zero_deployed_all", "scaled to zero: all deployed (s)"),
    ("zero_peak_pss_mb", "scaled to zero: peak PSS (MB)"),
    ("zero_cpu_per_db", "scaled to zero: operator CPU per database, process + Helm (s)"),
    ("zero_apiserver_cpu", "scaled to zero: kube-apiserver CPU (s)"),
    ("zero_floor_all", "scaled to zero, floor (no operator): all applied (s)"),
    ("zero_floor_apiserver_cpu", "scaled to zero, floor: kube-apiserver CPU (s)"),
    ("zero_vs_floor", "scaled to zero: deployed / floor"),
    ("restart_seconds", "restart over the idle databases: all confirmed (s)"),
    ("restart_helm_runs", "restart: Helm runs"),
    ("restart_reads", "restart: operator API reads"),
)


def _across(values: list[Any]) -> str:
    numbers = [v for v in values if isinstance(v, (int, float))]
    if not numbers:
        return "-"
    if len(numbers) == 1:
        return _s(numbers[0], 2 if isinstance(numbers[0], float) and numbers[0] < 10 else 1)
    spread = stats.across(numbers)
    return f"{_s(spread['median'])} [{_s(spread['min'])}-{_s(spread['max'])}]" + (
        f" {spread['spread'] * 100:.0f}%" if spread["spread"] is not None else ""
    )


def summary_table(results: dict[str, Any]) -> str:
    sizes = by_size(results)
    ns = sorted(sizes)
    rows = [
        [title, *(_across([m[key] for m in sizes[n]]) for n in ns)]
        for key, title in ROWS
        if any(m[key] is not None for n in ns for m in sizes[n])
    ]
    kinds: dict[str, list[float]] = {}
    for n in ns:
        for m in sizes[n]:
            for kind in m["writes_per_db_by_kind"] or {}:
                kinds.setdefault(kind, [])
    for kind in kinds:
        rows.append(
            [
                f"  writes per database: {kind}",
                *(_across([(m["writes_per_db_by_kind"] or {}).get(kind) for m in sizes[n]]) for n in ns),
            ]
        )
    runs = len(results.get("runs", []))
    return f"Per size, median [min-max] spread over {runs} run(s)\n" + table(["measure", *(f"N={n}" for n in ns)], rows)


def tables(results: dict[str, Any]) -> str:
    parts = [summary_table(results)]
    checks = results.get("targets") or []
    if checks:
        parts.append(
            "Targets (each must hold in every run)\n"
            + table(
                ["target", "measured", "met"],
                [[t["target"], t["measured"], {True: "yes", False: "NO"}.get(t["met"], "-")] for t in checks],
            )
        )
    machine = results.get("machine", {})
    parts.append(
        f"machine: {machine.get('cores')} cores ({machine.get('cpu_model')}), {machine.get('memory_gb')} GB; "
        f"load average at start {machine.get('load_average_at_start')}, "
        f"at end {machine.get('load_average_at_end')}"
    )
    return "\n\n".join(parts)


def _target(name: str, values: list[Any], ok: Callable[[Any], bool], unit: str = "") -> dict[str, Any] | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    shown = ", ".join(_s(v, 2) + unit for v in values)
    return {"target": name, "measured": shown, "met": len(present) == len(values) and all(ok(v) for v in present)}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, judged on what ran: a target holds when it holds in every run."""
    sizes = by_size(results)
    out: list[dict[str, Any] | None] = []
    at100 = sizes.get(100, [])

    def values(runs: list[dict[str, Any]], key: str) -> list[Any]:
        return [m[key] for m in runs]

    out += [
        _target(
            f"N=100: StatefulSets ready p50 <= {STS_READY_P50:.0f} s",
            values(at100, "sts_ready_p50"),
            lambda v: v <= STS_READY_P50,
            " s",
        ),
        _target(
            f"N=100: all StatefulSets ready <= {STS_READY_ALL:.0f} s",
            values(at100, "sts_ready_all"),
            lambda v: v <= STS_READY_ALL,
            " s",
        ),
        _target(
            f"N=100: writes per database <= {WRITES_PER_DB:.0f}",
            values(at100, "writes_per_db"),
            lambda v: v <= WRITES_PER_DB,
        ),
        _target(
            f"N=100: kube-apiserver CPU in the create wave <= {APISERVER_CPU:.0f} s",
            values(at100, "apiserver_cpu"),
            lambda v: v <= APISERVER_CPU,
            " s",
        ),
        _target(
            f"N=100: all deleted within {DELETE_ALL:.0f} s",
            values(at100, "delete_all"),
            lambda v: v <= DELETE_ALL,
            " s",
        ),
        _target(
            f"N=100: delete with < {DELETE_CPU:.0f} s of operator CPU",
            values(at100, "delete_cpu"),
            lambda v: v < DELETE_CPU,
            " s",
        ),
    ]
    if len(at100) > 1:
        for clock in CLOCKS:
            numbers = [v for v in values(at100, clock) if v is not None]
            if len(numbers) == len(at100):
                spread = stats.across(numbers)["spread"]
                out.append(
                    {
                        "target": f"N=100: {clock} spread between runs < {SPREAD * 100:.0f} %",
                        "measured": f"{spread * 100:.0f} %" if spread is not None else "-",
                        "met": spread is not None and spread < SPREAD,
                    }
                )
    for n, runs in sorted(sizes.items()):
        out.append(
            _target(
                f"N={n}: idle: 0 Helm runs and 0 API writes",
                [(m["idle_helm_runs"], m["idle_writes"]) if m["idle_writes"] is not None else None for m in runs],
                lambda v: v == (0, 0),
            )
        )
        out.append(
            _target(
                f"N={n}: all Ready within {READY_VS_FLOOR}x the floor",
                values(runs, "ready_vs_floor"),
                lambda v: v <= READY_VS_FLOOR,
                "x",
            )
        )
    at1000 = sizes.get(1000, [])
    out += [
        _target(
            f"N=1000: scaled to zero, all deployed <= {ZERO_1000_DEPLOYED:.0f} s",
            values(at1000, "zero_deployed_all"),
            lambda v: v <= ZERO_1000_DEPLOYED,
            " s",
        ),
        _target(
            f"N=1000: peak PSS < {PSS_1000_MB:.0f} MB",
            [
                max((v for v in (m["peak_pss_mb"], m["zero_peak_pss_mb"]) if v is not None), default=None)
                for m in at1000
            ],
            lambda v: v < PSS_1000_MB,
            " MB",
        ),
    ]
    for key, wave in (("cpu_per_db", "create wave"), ("zero_cpu_per_db", "scaled to zero")):
        per100 = stats.median([m[key] for m in at100 if m[key] is not None])
        if per100 and any(m[key] is not None for m in at1000):
            out.append(
                _target(
                    f"N=1000: operator CPU per database ({wave}) within {CPU_PER_DB_GROWTH}x of N=100's",
                    [m[key] / per100 if m[key] is not None else None for m in at1000],
                    lambda v: v <= CPU_PER_DB_GROWTH,
                    "x",
                )
            )
    return [t for t in out if t is not None]


REAL_NODE_VS_FLOOR = 1.1  # the target for the seed on real pods


def real_node_summary(turns: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """bench.real_node's turns as medians, and the ratios its target reads: the MyDatabase Ready (the operator's
    apply to Ready) against the floor's 3 pods ready (the same manifests applied with kubectl)."""

    def median(who: str, key: str) -> float | None:
        return stats.median([turn[key] for turn in turns.get(who, []) if key in turn])

    floor_pods = median("floor", "pods_ready")
    ready_vs_floor = stats.ratio(median("operator", "ready"), floor_pods)
    return {
        "operator: 3 pods ready, median (s)": median("operator", "pods_ready"),
        "operator: MyDatabase Ready, median (s)": median("operator", "ready"),
        "floor: 3 pods ready, median (s)": floor_pods,
        "pods ready / floor": stats.ratio(median("operator", "pods_ready"), floor_pods),
        "Ready / floor": ready_vs_floor,
        f"Ready within {REAL_NODE_VS_FLOOR}x the floor": ready_vs_floor is not None
        and ready_vs_floor <= REAL_NODE_VS_FLOOR,
    }
