"""The waves of one size N: the operator's (create, idle, update, delete), the floors, and N scaled to zero."""

from __future__ import annotations

import argparse
import functools
import time
from typing import Any

from . import floor, kube, prom, report, stats
from .measure import Snapshot, in_parallel, latencies, log, wait_counts, wait_goals, window
from .process import OperatorProcess, Sampler
from .setup import SCHEDULES, database, new_operator, start_operator

MERGE = "application/merge-patch+json"


def run_operator(ctx: argparse.Namespace, n: int, namespace: str) -> dict[str, Any]:
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    crs, releases, sets = kube.Tracker(kube.by_name), kube.Tracker(kube.by_helm_release), kube.Tracker(kube.by_name)
    watches = [
        kube.start_watch(
            functools.partial(
                cluster.custom.list_namespaced_custom_object, kube.GROUP, kube.VERSION, namespace, kube.PLURAL
            ),
            crs,
        ),
        kube.start_watch(functools.partial(cluster.core.list_namespaced_config_map, namespace), releases, "owner=helm"),
        kube.start_watch(functools.partial(cluster.apps.list_namespaced_stateful_set, namespace), sets),
    ]
    result: dict[str, Any] = {"namespace": namespace}
    operator = sampler = None
    try:
        operator = start_operator(ctx, f"operator-{n}.log")
        sampler = Sampler(operator.pid, interval=ctx.sample_interval)
        sampler.start()
        log(
            f"N={n}: operator started and watching (pid {operator.pid}, metrics :{operator.metrics_port}, "
            f"resync {ctx.resync:.0f}s)"
        )
        timeout = ctx.timeout or 120 + 2.0 * n

        # --- create N at once
        crs.add_goal("ready", lambda k, o: kube.cr_ready(o, 1))
        crs.add_goal("reported", lambda k, o: kube.cr_revision(o) >= 1)
        crs.add_goal("first-backup", lambda k, o: kube.first_backup_started(o))
        releases.add_goal("deployed", lambda k, o: kube.helm_release_deployed(o, 1))
        sets.add_goal("pods", lambda k, o: kube.statefulset_ready(o))
        before = Snapshot(cluster, operator, ctx.pids)
        sampler.phase = "create"
        log(f"N={n}: creating {n} MyDatabases in {namespace}")
        t0 = time.monotonic()
        created: dict[str, float] = {}

        def create(name: str) -> None:
            cluster.custom.create_namespaced_custom_object(
                kube.GROUP, kube.VERSION, namespace, kube.PLURAL, database(name, SCHEDULES[0])
            )
            created[name] = time.monotonic() - t0

        in_parallel(create, names)
        log(f"N={n}: {n} created in {max(created.values()):.1f}s; waiting for Ready (timeout {timeout:.0f}s)")
        converged = wait_goals(
            f"N={n} create",
            [(releases, "deployed", "deployed"), (sets, "pods", "pods ready"), (crs, "ready", "Ready")],
            n,
            timeout,
        )
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

        # --- steady state, once each new database has started its first base backup (the operator does
        # that once, right after Ready: it is a new database's work, not the idle one's)
        sampler.phase = "settle"
        wait_goals(f"N={n} first base backups", [(crs, "first-backup", "started")], n, timeout)
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
        log(
            f"N={n}: idle: {result['idle']['helm_runs']} helm runs, {result['idle']['operator_api']['writes']} "
            f"operator API writes, {result['idle']['operator_api']['reads']} reads, "
            f"{result['idle']['reconciles']} reconciles"
        )

        # --- update wave: one field on all N
        base = {name: kube.cr_revision(obj) for name, obj in crs.snapshot().items()}
        crs.add_goal("updated", lambda k, o: kube.cr_ready(o, base.get(k, 0) + 1))
        crs.add_goal("update-reported", lambda k, o: kube.cr_revision(o) >= base.get(k, 0) + 1)
        releases.add_goal("update-deployed", lambda k, o: kube.helm_release_deployed(o, base.get(k, 0) + 1))
        before = Snapshot(cluster, operator, ctx.pids)
        sampler.phase = "update"
        log(f"N={n}: update wave: spec.backup.schedule on all {n}")
        t0 = time.monotonic()
        in_parallel(
            lambda name: cluster.custom.patch_namespaced_custom_object(
                kube.GROUP,
                kube.VERSION,
                namespace,
                kube.PLURAL,
                name,
                {"spec": {"backup": {"schedule": SCHEDULES[1]}}},
                _content_type=MERGE,
            ),
            names,
        )
        converged = wait_goals(
            f"N={n} update", [(releases, "update-deployed", "deployed"), (crs, "updated", "Ready")], n, timeout
        )
        after = Snapshot(cluster, operator, ctx.pids)
        result["update"] = {
            "converged": converged,
            "deployed": stats.summary(latencies(releases, "update-deployed", t0), n),
            "reported": stats.summary(latencies(crs, "update-reported", t0), n),
            "ready": stats.summary(latencies(crs, "updated", t0), n),
            **window(before, after, ctx.meaning, n),
        }
        log(f"N={n}: update: " + report.one_line(result["update"]))

        # --- delete wave: all N at once
        sampler.phase = "delete"
        result["delete"] = delete_wave(ctx, n, namespace, names, crs, sets, operator, watches, timeout)
        log(f"N={n}: delete: " + report.delete_line(result["delete"]))
    finally:
        if sampler:
            sampler.stop()
            result["memory"] = {
                "overall": sampler.overall.as_dict(),
                **{phase: peaks.as_dict() for phase, peaks in sampler.peaks.items()},
                "series": sampler.series,
            }
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


def delete_wave(
    ctx: argparse.Namespace,
    n: int,
    namespace: str,
    names: list[str],
    crs: kube.Tracker,
    sets: kube.Tracker,
    operator: OperatorProcess,
    watches: list[kube.Watch],
    timeout: float,
) -> dict[str, Any]:
    """Delete every MyDatabase at once; a database is gone when its CR and every record of its release are.
    The wave ends when the StatefulSets are gone too (the garbage collector's work, for owned releases)."""
    cluster: kube.Cluster = ctx.cluster
    records = kube.Tracker(kube.by_name)
    watches.append(
        kube.start_watch(functools.partial(cluster.core.list_namespaced_config_map, namespace), records, "owner=helm")
    )
    release_of = {record: kube.by_helm_release(obj) or "" for record, obj in records.snapshot().items()}
    wanted = set(names)

    def crs_gone() -> dict[str, float]:
        return {name: t for name, t in crs.deleted_at().items() if name in wanted}

    def releases_gone() -> dict[str, float]:
        return kube.releases_gone(release_of, records.deleted_at())

    def statefulsets_gone() -> dict[str, float]:
        return {name: t for name, t in sets.deleted_at().items() if name in wanted}

    before = Snapshot(cluster, operator, ctx.pids)
    log(f"N={n}: delete wave: deleting all {n} MyDatabases")
    t0 = time.monotonic()
    in_parallel(
        lambda name: cluster.custom.delete_namespaced_custom_object(
            kube.GROUP, kube.VERSION, namespace, kube.PLURAL, name
        ),
        names,
    )
    converged = wait_counts(
        f"N={n} delete",
        [
            ("CRs gone", lambda: len(crs_gone())),
            ("releases gone", lambda: len(releases_gone())),
            ("StatefulSets gone", lambda: len(statefulsets_gone())),
        ],
        n,
        timeout,
    )
    after = Snapshot(cluster, operator, ctx.pids)
    both = {name: max(t, releases_gone().get(name, t)) - t0 for name, t in crs_gone().items()}
    return {
        "converged": converged,
        "crs_gone": stats.summary({name: t - t0 for name, t in crs_gone().items()}, n),
        "releases_gone": stats.summary({name: t - t0 for name, t in releases_gone().items()}, n),
        "statefulsets_gone": stats.summary({name: t - t0 for name, t in statefulsets_gone().items()}, n),
        "gone": stats.summary(both, n),
        **window(before, after, ctx.meaning, n),
    }


def run_scaled_to_zero(ctx: argparse.Namespace, n: int, namespace: str) -> dict[str, Any]:
    """N hibernated databases at once: every release and claim, no pod. Flux's published
    figures are for apps scaled to zero, so this is the wave to hold them against."""
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    crs, releases = kube.Tracker(kube.by_name), kube.Tracker(kube.by_helm_release)
    watches = [
        kube.start_watch(
            functools.partial(
                cluster.custom.list_namespaced_custom_object, kube.GROUP, kube.VERSION, namespace, kube.PLURAL
            ),
            crs,
        ),
        kube.start_watch(functools.partial(cluster.core.list_namespaced_config_map, namespace), releases, "owner=helm"),
    ]
    result: dict[str, Any] = {"namespace": namespace}
    operator = sampler = None
    try:
        operator = start_operator(ctx, f"operator-{n}-scaled-to-zero.log")
        sampler = Sampler(operator.pid, interval=ctx.sample_interval)
        sampler.start()
        crs.add_goal("hibernated", lambda k, o: kube.cr_hibernated(o))
        releases.add_goal("deployed", lambda k, o: kube.helm_release_deployed(o, 1))
        before = Snapshot(cluster, operator, ctx.pids)
        log(f"N={n}: scaled to zero: creating {n} hibernated MyDatabases in {namespace}")
        t0 = time.monotonic()
        in_parallel(
            lambda name: cluster.custom.create_namespaced_custom_object(
                kube.GROUP, kube.VERSION, namespace, kube.PLURAL, database(name, SCHEDULES[0], hibernate=True)
            ),
            names,
        )
        converged = wait_goals(
            f"N={n} scaled to zero",
            [(releases, "deployed", "deployed"), (crs, "hibernated", "Hibernated")],
            n,
            ctx.timeout or 120 + 2.0 * n,
        )
        after = Snapshot(cluster, operator, ctx.pids)
        result.update(
            {
                "converged": converged,
                "deployed": stats.summary(latencies(releases, "deployed", t0), n),
                "hibernated": stats.summary(latencies(crs, "hibernated", t0), n),
                **window(before, after, ctx.meaning, n),
            }
        )
        log(
            f"N={n}: scaled to zero: deployed all {result['deployed']['all']}s, "
            f"Hibernated all {result['hibernated']['all']}s"
        )
        sampler.stop()
        result["memory"] = {"overall": sampler.overall.as_dict()}
        if converged and not ctx.no_restart:
            operator.stop()
            result["restart"] = restart_wave(ctx, n, f"operator-{n}-restart.log")
    finally:
        if sampler:
            sampler.stop()
        for watch in watches:
            watch.stop()
        if operator:
            operator.stop()
            result["operator_tracebacks"] = operator.tracebacks() if operator.log_path.exists() else None
        cluster.strip_finalizers(namespace)
        result["cleanup_ok"] = cluster.delete_namespace(namespace, ctx.cleanup_timeout, log)
    return result


def restart_wave(ctx: argparse.Namespace, n: int, log_name: str) -> dict[str, Any]:
    """A new operator process over n idle databases: how long until each is confirmed up to date
    (reconciled once, no Helm run) and what that costs the API server (a list per kind, not a read per database)."""
    cluster: kube.Cluster = ctx.cluster
    before = Snapshot(cluster, None, ctx.pids)
    t0 = time.monotonic()
    operator = new_operator(ctx, log_name)
    try:
        operator.start()
        log(f"N={n}: restart: a new operator (pid {operator.pid}) over {n} idle databases")
        converged = wait_counts(
            f"N={n} restart", [("confirmed", lambda: reconciles(operator))], n, ctx.timeout or 120 + 2.0 * n
        )
        seconds = time.monotonic() - t0
        after = Snapshot(cluster, operator, ctx.pids)
    finally:
        operator.stop()
    out = {"converged": converged, "confirmed_all_seconds": round(seconds, 2), **window(before, after, ctx.meaning, n)}
    log(
        f"N={n}: restart: {n} confirmed in {seconds:.1f}s; {out['helm_runs']} helm runs, operator API "
        f"{out['operator_api']['reads']} reads ({out['operator_api']['by_verb'].get('list', {})} lists), "
        f"{out['operator_api']['writes']} writes"
    )
    return out


def reconciles(operator: OperatorProcess) -> int:
    try:
        return round(prom.total(operator.metrics(), "mydb_reconciles_total"))
    except OSError:  # the metrics server is not listening yet
        return 0


def run_floor(ctx: argparse.Namespace, n: int, namespace: str, client: str, hibernate: bool = False) -> dict[str, Any]:
    """The same manifests with no operator: client "ssa" is the floor proper, "kubectl" a person with kubectl.
    hibernate: the scaled-to-zero wave's manifests; no pod to wait for, so the floor ends when all is applied."""
    cluster: kube.Cluster = ctx.cluster
    names = [f"db-{i:04d}" for i in range(n)]
    cluster.create_namespace(namespace)
    sets = kube.Tracker(kube.by_name)
    sets.add_goal("pods", lambda k, o: kube.statefulset_ready(o))
    watch = (
        None
        if hibernate
        else kube.start_watch(functools.partial(cluster.apps.list_namespaced_stateful_set, namespace), sets)
    )
    env = floor.render_env(f"{ctx.bins}/helm", ctx.bins, ctx.logs / "render-home")
    try:
        rendered, how = floor.render_wave(
            [database(name, SCHEDULES[0], hibernate) for name in names], namespace, env, ctx.logs / "floor", log
        )
        before = Snapshot(cluster, None, ctx.pids)
        objects = n * how["objects_per_database"]
        if client == "ssa":
            log(
                f"N={n}: floor: server-side apply of {objects} objects from one client, "
                f"{ctx.floor_concurrency} in flight, in {namespace}"
            )
            t0 = time.monotonic()
            finished, errors = floor.apply_wave_ssa(rendered, namespace, cluster.api, ctx.floor_concurrency)
            how["concurrency"] = ctx.floor_concurrency
        else:
            log(
                f"N={n}: a person with kubectl: kubectl apply --server-side of {objects} objects, "
                f"{floor.KUBECTL_PROCESSES} databases at a time, in {namespace}"
            )
            t0 = time.monotonic()
            finished, errors = floor.apply_wave(
                rendered, namespace, f"{ctx.bins}/kubectl", cluster.kubeconfig, floor.KUBECTL_PROCESSES, env
            )
            how["concurrency"] = floor.KUBECTL_PROCESSES
        for name, error in list(errors.items())[:3]:
            log(f"N={n}: floor ({client}): apply of {name} failed: {error}")
        log(
            f"N={n}: floor ({client}): applied in {max(finished.values()) - t0:.1f}s"
            + ("" if hibernate else "; waiting for pods")
        )
        converged = hibernate or wait_goals(
            f"N={n} floor ({client})", [(sets, "pods", "pods ready")], n, ctx.timeout or 120 + 2.0 * n
        )
        after = Snapshot(cluster, None, ctx.pids)
        out = {
            "client": client,
            "hibernate": hibernate,
            "converged": converged and not errors,
            "apply_errors": len(errors),
            **how,
            "applied": stats.summary({k: t - t0 for k, t in finished.items()}, n),
            # kubectl: its processes; ssa: this harness's process, the floor's one client (and its watches)
            "client_cpu_seconds": round(
                after.children - before.children if client == "kubectl" else after.harness - before.harness, 2
            ),
            "api": {
                k: v
                for k, v in window(before, after, ctx.meaning, n).items()
                if k in ("all_clients_api", "cpu_seconds")
            },
        }
        if not hibernate:
            out["pods_ready"] = stats.summary(latencies(sets, "pods", t0), n)
            log(
                f"N={n}: floor ({client}): all pods ready in {out['pods_ready']['all']}s "
                f"(p50 {out['pods_ready']['p50']}s, p95 {out['pods_ready']['p95']}s)"
            )
        return out
    finally:
        if watch:
            watch.stop()
        log(f"N={n}: deleting {namespace}")
        ok = cluster.delete_namespace(namespace, ctx.cleanup_timeout, log)
        if not ok:
            log(f"N={n}: {namespace} still terminating after {ctx.cleanup_timeout:.0f}s; going on")
