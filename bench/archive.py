"""The continuous archive on the real node: its recovery point objective, and how long a restore takes.

    .venv/bin/python -m bench.archive [--megabytes 100] [--trials 3]   (make bench-archive)

Needs the local cluster with its real node and the images in its registry (run
`make demo` first). In a fresh namespace, an operator from this checkout (the
platform config of examples/platform-local-node.yaml, leader election off)
runs a database of 2 pods with backups (the archive on), and:

- recovery point objective: while a client pod commits one row per connection
  through the read-write Service (the e2e tests' writer), the primary's own
  measure of the archive's lag, `flush_lag` of its walsender in
  pg_stat_replication (the time from a commit's flush on the primary to the
  archive's reply that the same WAL is on its disk), sampled once a second;
- restore: the database filled with --megabytes of rows, a base backup taken
  (backup-now), a few more rows written, then a new MyDatabase of one pod
  restored from it to the archive's end: the time from `kubectl apply` to
  Ready, each trial a new database, and whether its last row is there.

Median, min and max go to stdout and, with every sample, to a JSON file in --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from mydb_operator.config import Config

from . import stats
from .failover import Cluster, wait
from .measure import log
from .process import REPO, OperatorProcess
from .real_node import platform_config
from .setup import bin_dir

sys.path.insert(0, str(REPO / "tests"))
from e2e import primaries  # the e2e tests' writer and process tools, under tests/

NAME = "bench-archive"


def figures(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    return {
        "median": stats.percentile(ordered, 50),
        "min": ordered[0] if ordered else None,
        "max": ordered[-1] if ordered else None,
        "samples": len(ordered),
    }


def sql(cluster: Cluster, namespace: str, pod: str, query: str) -> str:
    answer = primaries.sql_at(cluster, namespace, pod, query)
    if answer is None:
        raise RuntimeError(f"{pod}: {query}: no answer")
    return answer


def status_of(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The status of this benchmark's database (Cluster.status reads bench.failover's)."""
    found = cluster.kubectl("get", "-n", namespace, "mydb", NAME, "-o", "json", check=False)
    return (json.loads(found.stdout).get("status") or {}) if found.returncode == 0 else {}


def archive_of(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return ((status_of(cluster, namespace).get("backup") or {}).get("archive")) or {}


def archive_lag(cluster: Cluster, namespace: str, primary: str, seconds: int) -> list[float]:
    """flush_lag of the archive's walsender, in seconds, once a second while the writer commits."""
    samples = []
    query = "select extract(epoch from flush_lag) from pg_stat_replication where application_name = 'mydb-archive'"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = sql(cluster, namespace, primary, query)
        if answer:
            samples.append(float(answer))
        time.sleep(1)
    return samples


def restore_trial(cluster: Cluster, namespace: str, number: int) -> dict[str, float | bool | str]:
    """A new database restored to the archive's end; mark NUMBER, committed just before, must be in it."""
    name = f"{NAME}-copy-{number}"
    body = {
        "apiVersion": "myapp.example.com/v1",
        "kind": "MyDatabase",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "version": "15.2", "storage": "2Gi", "restore": {"fromDatabase": NAME}},
    }
    started = time.monotonic()
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait(
        f"{name} Ready",
        lambda: bool(
            cluster.kubectl("get", "-n", namespace, "mydb", name, "-o", "jsonpath={.status.ready}", check=False).stdout
            == "true"
        ),
        900,
    )
    took = time.monotonic() - started
    last = sql(cluster, namespace, f"{name}-0", "select max(id) from marks")
    cluster.kubectl("delete", "-n", namespace, "mydb", name, "--wait=true", "--timeout=180s", check=False)
    return {"database": name, "apply_to_ready": round(took, 1), "has_the_last_commit": last == str(number)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.archive", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=100, help="the database's size before the base backup")
    parser.add_argument("--trials", type=int, default=3, help="restores (default 3)")
    parser.add_argument("--lag-seconds", type=int, default=30, help="how long to sample the archive's lag")
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    ctx = parser.parse_args(argv)
    cluster_dir = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO / ".cluster"))
    registry = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    bins = bin_dir()
    cluster = Cluster(cluster_dir / "admin.kubeconfig", bins)
    logs = Path(ctx.out) / f"{stamp}-archive-logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.environ["MYDB_PLATFORM_CONFIG"] = str(platform_config(registry, Path(tempfile.mkdtemp(prefix="mydb-ar-"))))
    namespace = f"bench-archive-{stamp.lower()[:15]}"
    cluster.kubectl("create", "namespace", namespace)
    operator = OperatorProcess(
        cluster.kubeconfig,
        f"{bins}/helm",
        bins,
        logs / "operator.log",
        resync=10,
        helm_parallel=Config().helm_parallel,
        rollout_window=16,
        extra_args=["--namespace", namespace, "--leader-elect=false"],
    )
    operator.start()
    result: dict[str, Any] = {"started": stamp, "megabytes": ctx.megabytes}
    try:
        seed = yaml.safe_load((REPO / "examples" / "production-db.yaml").read_text())
        body = {
            "apiVersion": seed["apiVersion"],
            "kind": seed["kind"],
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 2,
                "version": seed["spec"]["version"],
                "storage": "2Gi",
                "backup": seed["spec"]["backup"],
            },
        }
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
        wait("the archive streaming", lambda: archive_of(cluster, namespace).get("streaming"))
        primary = status_of(cluster, namespace)["primary"]

        writer = primaries.Writer(cluster, namespace, NAME)
        lags = archive_lag(cluster, namespace, primary, ctx.lag_seconds)
        writer.halt()
        result["archive_flush_lag_seconds"] = {**figures(lags), "values": lags}
        log(f"archive flush_lag under the writer: {figures(lags)}")

        rows = ctx.megabytes * 1024 * 1024 // 100  # a row of filler takes about 100 bytes on disk
        sql(
            cluster,
            namespace,
            primary,
            f"create table filler as select i, md5(i::text) || md5((i + 1)::text) as t"
            f" from generate_series(1, {rows}) i; create table marks (id int)",
        )
        result["database_bytes"] = int(sql(cluster, namespace, primary, "select pg_database_size('postgres')"))
        cluster.kubectl("annotate", "-n", namespace, "mydb", NAME, "myapp.example.com/backup-now=bench", "--overwrite")
        wait(
            "the base backup",
            lambda: (
                (status_of(cluster, namespace).get("backup") or {}).get("lastOnDemandJob")
                and (status_of(cluster, namespace).get("backup") or {}).get("lastSuccessfulJob")
                == (status_of(cluster, namespace).get("backup") or {}).get("lastOnDemandJob")
            ),
            900,
        )
        trials = []
        for number in range(1, ctx.trials + 1):
            sql(cluster, namespace, primary, f"insert into marks values ({number})")
            trial = restore_trial(cluster, namespace, number)
            log(f"restore {number}: {trial}")
            trials.append(trial)
        result["restores"] = trials
        result["restore_seconds"] = figures([float(t["apply_to_ready"]) for t in trials])
    finally:
        cluster.kubectl("delete", "-n", namespace, "mydb", "--all", "--wait=true", "--timeout=180s", check=False)
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    path = Path(ctx.out) / f"{stamp}-archive.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"archive flush_lag (s): {result.get('archive_flush_lag_seconds', {})}")
    print(f"database: {result.get('database_bytes')} bytes; restore to Ready (s): {result.get('restore_seconds')}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
