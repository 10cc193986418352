"""A major upgrade in place on the real node: how long writes stop, and how long it takes in all.

    .venv/bin/python -m bench.upgrade [--megabytes 200] [--trials 1]   (make bench-upgrade)

Needs the local cluster with its real node and the images in its registry (run
`make demo` first). In a fresh namespace, an operator from this checkout (the
platform config of examples/platform-local-node.yaml, leader election off)
runs, for each trial, a new database like the seed (3 pods, 15.2, dumps only:
a database with the continuous archive is not upgraded in place yet), filled
with --megabytes of rows, then raised to the local 17 while a client pod
commits one row per connection through the read-write Service (the e2e
tests' writer). It reports:

- writes stopped: the longest gap between two commits (the database down);
- patch to Succeeded and patch to Ready (every pod on 17, the replicas cloned);
- the Job's own time (pg_upgrade --check and --link, the old programs copied);
- that no committed row is missing.

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

from mydb_operator.config import Config
from mydb_operator.model.timestamps import parse_time

from .archive import figures, sql
from .failover import Cluster, wait
from .measure import log
from .process import REPO, OperatorProcess
from .real_node import platform_config
from .setup import bin_dir

sys.path.insert(0, str(REPO / "tests"))
from e2e import primaries  # the e2e tests' writer and process tools, under tests/
from e2e.realnode import images  # hack/images.sh list: the local 17's image

NAME = "bench-upgrade"


def status_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found = cluster.kubectl("get", "-n", namespace, "mydb", name, "-o", "json", check=False)
    return (json.loads(found.stdout).get("status") or {}) if found.returncode == 0 else {}


def job_seconds(cluster: Cluster, namespace: str, job: str) -> float | None:
    """From the Job's start to its completion, as the Job controller recorded them."""
    found = cluster.kubectl("get", "-n", namespace, "job", job, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    times = json.loads(found.stdout).get("status") or {}
    started, finished = parse_time(times.get("startTime")), parse_time(times.get("completionTime"))
    return (finished - started).total_seconds() if started and finished else None


def trial(cluster: Cluster, namespace: str, number: int, megabytes: int, version: str) -> dict[str, Any]:
    """One database at 15.2, filled, upgraded to VERSION under a writer."""
    name = f"{NAME}-{number}"
    body = {
        "apiVersion": "myapp.example.com/v1",
        "kind": "MyDatabase",
        "metadata": {"name": name},
        "spec": {"replicas": 3, "version": "15.2", "storage": "2Gi"},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait(f"{name} Ready", lambda: status_of(cluster, namespace, name).get("ready") is True, 600)
    primary = status_of(cluster, namespace, name)["primary"]
    rows = megabytes * 1024 * 1024 // 100  # a row of filler takes about 100 bytes on disk
    sql(
        cluster,
        namespace,
        primary,
        f"create table filler as select i, md5(i::text) || md5((i + 1)::text) as t from generate_series(1, {rows}) i",
    )
    size = int(sql(cluster, namespace, primary, "select pg_database_size('postgres')"))
    writer = primaries.Writer(cluster, namespace, name)
    time.sleep(3)
    started = time.monotonic()
    patch = json.dumps({"spec": {"version": version}})
    cluster.kubectl("patch", "-n", namespace, "mydb", name, "--type=merge", "-p", patch)
    wait(
        f"{name} upgraded",
        lambda: (status_of(cluster, namespace, name).get("upgrade") or {}).get("phase") in ("Succeeded", "Failed"),
        1800,
    )
    succeeded = time.monotonic() - started
    told = status_of(cluster, namespace, name)["upgrade"]
    wait(f"{name} Ready on {version}", lambda: status_of(cluster, namespace, name).get("ready") is True, 900)
    ready = time.monotonic() - started
    time.sleep(3)
    writes = writer.halt()
    primary = status_of(cluster, namespace, name)["primary"]
    result = {
        "database": name,
        "database_bytes": size,
        "phase": told["phase"],
        "writes_stopped_seconds": round(primaries.unavailable(writes, started), 1),
        "patch_to_succeeded_seconds": round(succeeded, 1),
        "patch_to_ready_seconds": round(ready, 1),
        "job_seconds": job_seconds(cluster, namespace, told.get("job", "")),
        "committed_rows_missing": len(primaries.missing_writes(cluster, namespace, primary, writes)),
    }
    cluster.kubectl("delete", "-n", namespace, "mydb", name, "--wait=true", "--timeout=180s", check=False)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.upgrade", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=200, help="the database's size before the upgrade")
    parser.add_argument("--trials", type=int, default=1, help="upgrades, each of a new database (default 1)")
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    ctx = parser.parse_args(argv)
    cluster_dir = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO / ".cluster"))
    registry = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"
    version = images()["POSTGRES17_IMAGE"].rsplit(":", 1)[1]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    bins = bin_dir()
    cluster = Cluster(cluster_dir / "admin.kubeconfig", bins)
    logs = Path(ctx.out) / f"{stamp}-upgrade-logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.environ["MYDB_PLATFORM_CONFIG"] = str(platform_config(registry, Path(tempfile.mkdtemp(prefix="mydb-up-"))))
    namespace = f"bench-upgrade-{stamp.lower()[:15]}"
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
    result: dict[str, Any] = {"started": stamp, "megabytes": ctx.megabytes, "to": version, "trials": []}
    try:
        for number in range(1, ctx.trials + 1):
            done = trial(cluster, namespace, number, ctx.megabytes, version)
            log(f"upgrade {number}: {done}")
            result["trials"].append(done)
    finally:
        cluster.kubectl("delete", "-n", namespace, "mydb", "--all", "--wait=true", "--timeout=180s", check=False)
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    for key in ("writes_stopped_seconds", "patch_to_succeeded_seconds", "patch_to_ready_seconds", "job_seconds"):
        result[key] = figures([float(t[key]) for t in result["trials"] if t.get(key) is not None])
    path = Path(ctx.out) / f"{stamp}-upgrade.json"
    path.write_text(json.dumps(result, indent=1))
    for key in ("writes_stopped_seconds", "patch_to_succeeded_seconds", "patch_to_ready_seconds", "job_seconds"):
        print(f"{key}: {result[key]}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
