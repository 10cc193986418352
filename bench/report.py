"""Readable tables and the issue's targets, from the results dict (pure)."""

from __future__ import annotations

from typing import Any

# The targets of the issue "Benchmark: how fast and how cheaply databases converge".
DEPLOYED_100_SECONDS = 27.0  # Flux helm-controller: 100 HelmReleases in 27 s (16 cores, kind)
READY_VS_FLOOR = 1.3
RSS_LIMIT_MB, RSS_AT = 200.0, 300


def _s(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def one_line(wave: dict) -> str:
    ready = wave["ready"]
    deployed = wave["deployed"]
    return (f"deployed all {_s(deployed['all'])}s; Ready p50 {_s(ready['p50'])}s p95 {_s(ready['p95'])}s "
            f"max {_s(ready['max'])}s ({ready['count']}/{ready['expected']}); {wave['helm_runs']} helm runs; "
            f"operator API {wave['operator_api']['reads']} reads {wave['operator_api']['writes']} writes; "
            f"operator CPU {wave['cpu_seconds']['operator']}s, helm CPU {wave['cpu_seconds']['helm']}s")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_s(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda row: "| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def _triple(summary: dict) -> str:
    return f"{_s(summary['p50'])} / {_s(summary['p95'])} / {_s(summary['max'])}"


def tables(results: dict) -> str:
    sizes = [s for s in results["sizes"] if "create" in s.get("operator", {})]
    parts = []
    conv = []
    for s in sizes:
        op = s["operator"]
        create, update = op["create"], op.get("update")
        fl = s.get("floor", {})
        conv.append([s["n"], create["deployed"]["all"], _triple(create["ready"]), create["ready"]["all"],
                     create["pods_ready"]["all"], (fl.get("pods_ready") or {}).get("all"), s.get("ready_vs_floor"),
                     update["deployed"]["all"] if update else None, _triple(update["ready"]) if update else None])
    parts.append("Convergence, seconds from apply (p50 / p95 / max over databases; 'all' = the last one)\n" + table(
        ["N", "deployed all", "Ready p50/p95/max", "Ready all", "pods ready all", "floor all",
         "Ready/floor", "update deployed all", "update Ready p50/p95/max"], conv))

    cost = []
    for s in sizes:
        op = s["operator"]
        n = s["n"]
        c, u = op["create"], op.get("update") or {}
        mem = op.get("memory", {}).get("overall", {})
        cost.append([n, f"{c['helm_runs']} / {u.get('helm_runs', '-')}",
                     f"{c['operator_api']['reads_per_db']} / {c['operator_api']['writes_per_db']}",
                     f"{u['operator_api']['reads_per_db']} / {u['operator_api']['writes_per_db']}" if u else "-",
                     f"{round(c['all_clients_api']['reads'] / n, 1)} / {round(c['all_clients_api']['writes'] / n, 1)}",
                     f"{c['cpu_seconds']['operator']} / {c['cpu_seconds']['helm']}",
                     f"{u['cpu_seconds']['operator']} / {u['cpu_seconds']['helm']}" if u else "-",
                     mem.get("operator_rss_mb"), mem.get("tree_rss_mb"), mem.get("tree_pss_mb")])
    parts.append("Cost (create wave / update wave; API requests per database: reads / writes)\n" + table(
        ["N", "helm runs c/u", "op API/db create", "op API/db update", "all clients API/db create",
         "CPU s op/helm create", "CPU s op/helm update", "peak RSS op MB", "peak RSS tree MB",
         "peak PSS tree MB"], cost))

    zero = [[s["n"], _triple(z["deployed"]), z["deployed"]["all"], z["hibernated"]["all"], z["helm_runs"],
             z["cpu_seconds"]["operator"], z["cpu_seconds"]["helm"], z["cpu_seconds"].get("kube-apiserver")]
            for s in results["sizes"] for z in [s.get("scaled_to_zero")] if z and "deployed" in z]
    if zero:
        parts.append("Scaled to zero (hibernate: true: every release, no pod; Flux's condition), seconds from apply\n"
                     + table(["N", "deployed p50/p95/max", "deployed all", "Hibernated all", "helm runs",
                              "CPU s op", "CPU s helm", "CPU s apiserver"], zero))

    idle = []
    for s in sizes:
        i = s["operator"].get("idle")
        if not i:
            continue
        n = s["n"]
        minutes = i["seconds"] / 60
        idle.append([n, i["seconds"], i["reconciles"], i["helm_runs"], i["operator_api"]["writes"],
                     i["status_patches"], i["operator_api"]["reads"],
                     round(i["operator_api"]["reads"] / n / minutes, 1) if minutes else None,
                     i["all_clients_api"]["writes"], i["cpu_seconds"]["operator"]])
    parts.append("Steady state (idle window; unchanged databases)\n" + table(
        ["N", "seconds", "reconciles", "helm runs", "op API writes", "status patches", "op API reads",
         "op reads/db/min", "all clients writes", "op CPU s"], idle))

    checks = results.get("targets") or []
    if checks:
        parts.append("Targets\n" + table(["target", "measured", "met"],
                                         [[t["target"], t["measured"], {True: "yes", False: "NO"}.get(t["met"], "-")]
                                          for t in checks]))
    machine = results.get("machine", {})
    parts.append(f"machine: {machine.get('cores')} cores ({machine.get('cpu_model')}), {machine.get('memory_gb')} GB; "
                 f"load average at start {machine.get('load_average_at_start')}, "
                 f"at end {machine.get('load_average_at_end')}")
    return "\n\n".join(parts)


def targets(results: dict) -> list[dict]:
    """The issue's targets, judged on the sizes run (a target whose size was not run is left out)."""
    out = []
    for s in results.get("sizes", []):
        op = s.get("operator", {})
        n = s["n"]
        zero = (s.get("scaled_to_zero") or {}).get("deployed")
        if n == 100 and zero:
            value = zero["all"]
            out.append({"target": f"100 releases deployed within {DEPLOYED_100_SECONDS:.0f} s, scaled to zero "
                                  "(Flux's condition)",
                        "measured": f"{_s(value)} s", "met": value is not None and value <= DEPLOYED_100_SECONDS})
        create = op.get("create")
        if not create:
            continue
        if n == 100:
            value = create["deployed"]["all"]
            out.append({"target": f"100 releases deployed within {DEPLOYED_100_SECONDS:.0f} s, while 300 pods start",
                        "measured": f"{_s(value)} s", "met": value is not None and value <= DEPLOYED_100_SECONDS})
        if s.get("ready_vs_floor") is not None or "floor" in s:
            ratio = s.get("ready_vs_floor")
            out.append({"target": f"N={n}: all Ready within {READY_VS_FLOOR}x the floor",
                        "measured": f"{_s(ratio, 2)}x", "met": ratio is not None and ratio <= READY_VS_FLOOR})
        idle = op.get("idle")
        if idle:
            helm, writes = idle["helm_runs"], idle["operator_api"]["writes"]
            renewals = idle["operator_api"].get("lease_writes", 0)
            out.append({"target": f"N={n}: zero Helm runs and zero API writes when idle",
                        "measured": f"{helm} helm, {writes} writes ({idle['reconciles']} reconciles; "
                                    f"{renewals} Lease renewals apart)",
                        "met": helm == 0 and writes == 0})
        if n == RSS_AT:
            rss = op.get("memory", {}).get("overall", {}).get("operator_rss_mb")
            out.append({"target": f"operator peak RSS < {RSS_LIMIT_MB:.0f} MB at {RSS_AT} databases",
                        "measured": f"{_s(rss)} MB", "met": rss is not None and rss < RSS_LIMIT_MB})
    return out
