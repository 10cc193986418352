"""storageAutoGrow on the real node: how long from a volume crossing its threshold to grown filesystems.

    .venv/bin/python -m bench.autogrow [--growths 3]   (make bench-autogrow)

Needs the local cluster with its real node and the images in its registry (run
`make demo` first). In a fresh namespace, an operator from this checkout (the
platform config of examples/platform-local-node.yaml: the class local-xfs, real
XFS volumes; leader election off; resync 60 s, the default) runs a database of
2 pods with `storageAutoGrow: {thresholdPercent: 80, increment: 50%, limit: 4Gi,
intervalSeconds: 0}` on 1Gi. Each growth: a ballast file brings both volumes to
78 %, then PostgreSQL writes rows past 80 % (the moment of crossing), and the
clock runs until

- the operator's StorageAutoGrow Event (the kubelet measures every 10 s on
  this node, the operator reads a node's figures at most every 15 s, and looks
  at a database within 10 points of its threshold every 15 s: writes wake no pass);
- both claims report the new size;
- `df` in both pods shows the grown filesystem.

Median, min and max of each go to stdout and, with every sample, to a JSON file in --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mydb_operator.config import Config

from .archive import figures
from .failover import Cluster, wait
from .measure import log
from .process import REPO, OperatorProcess
from .real_node import platform_config
from .setup import bin_dir

NAME = "bench-autogrow"
STEPS = ("the Event", "claims grown", "filesystems grown")
DATA = "/var/lib/postgresql/data"
MI = 2**20


def in_postgres(cluster: Cluster, namespace: str, pod: str, line: str) -> str:
    return cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "sh", "-c", line).stdout


def filesystem(cluster: Cluster, namespace: str, pod: str) -> tuple[int, int]:
    used, size = in_postgres(cluster, namespace, pod, f"df -B1 --output=used,size {DATA}").split()[-2:]
    return int(used), int(size)


def fill_to(cluster: Cluster, namespace: str, pod: str, percent: int, number: int) -> None:
    used, size = filesystem(cluster, namespace, pod)
    missing = size * percent // 100 - used
    if missing > 0:
        in_postgres(cluster, namespace, pod, f"fallocate -l {missing} {DATA}/ballast-{number}")


def write_megabytes(cluster: Cluster, namespace: str, pod: str, first: int, megabytes: int) -> None:
    in_postgres(
        cluster,
        namespace,
        pod,
        'PGPASSWORD="$(cat "$CREDENTIALS_DIR/password")" psql -h 127.0.0.1 -U "$(cat "$CREDENTIALS_DIR/username")" '
        '-d postgres -v ON_ERROR_STOP=1 -Atc "create table if not exists filler (id int primary key, pad text); '
        f"insert into filler select i, repeat(md5(i::text), 32) from generate_series({first}, "
        f'{first + megabytes * 1024 - 1}) i"',
    )


def database(cluster: Cluster, namespace: str) -> dict[str, Any]:
    found = cluster.kubectl("get", "-n", namespace, "mydb", NAME, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def claim_sizes(cluster: Cluster, namespace: str) -> list[str]:
    claims = json.loads(
        cluster.kubectl("get", "-n", namespace, "pvc", "-l", f"app.kubernetes.io/instance={NAME}", "-o", "json").stdout
    )["items"]
    return sorted((c.get("status") or {}).get("capacity", {}).get("storage", "") for c in claims)


def growth_events(cluster: Cluster, namespace: str) -> int:
    listed = cluster.kubectl(
        "get", "-n", namespace, "events", "--field-selector", "reason=StorageAutoGrow", "-o", "json"
    ).stdout
    return len(json.loads(listed)["items"])


def one_growth(cluster: Cluster, namespace: str, number: int, pods: list[str]) -> dict[str, Any]:
    """Cross the threshold once; the seconds from the crossing to each step of the growth."""
    before = (database(cluster, namespace).get("status") or {}).get("storage", {}).get("size")
    events = growth_events(cluster, namespace)
    for pod in pods:
        fill_to(cluster, namespace, pod, 78, number)
    _, size = filesystem(cluster, namespace, pods[0])
    write_megabytes(cluster, namespace, pods[0], number * 10**6, size * 3 // 100 // MI + 1)
    crossed = time.monotonic()
    steps: dict[str, float] = {}

    def seen(step: str, check: Any) -> None:
        wait(step, check, 600)
        steps[step] = round(time.monotonic() - crossed, 1)

    seen("the Event", lambda: growth_events(cluster, namespace) > events)
    after = (database(cluster, namespace).get("status") or {})["storage"]["size"]
    seen("claims grown", lambda: claim_sizes(cluster, namespace) == [after] * len(pods))
    seen("filesystems grown", lambda: all(filesystem(cluster, namespace, p)[1] > size for p in pods))
    return {"from": before, "to": after, "seconds": steps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.autogrow", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--growths", type=int, default=3, help="growths measured (default 3: 1Gi to 3456Mi)")
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    ctx = parser.parse_args(argv)
    cluster_dir = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO / ".cluster"))
    registry = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    bins = bin_dir()
    cluster = Cluster(cluster_dir / "admin.kubeconfig", bins)
    logs = Path(ctx.out) / f"{stamp}-autogrow-logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.environ["MYDB_PLATFORM_CONFIG"] = str(platform_config(registry, Path(tempfile.mkdtemp(prefix="mydb-ag-"))))
    namespace = f"bench-autogrow-{stamp.lower()[:15]}"
    cluster.kubectl("create", "namespace", namespace)
    operator = OperatorProcess(
        cluster.kubeconfig,
        f"{bins}/helm",
        bins,
        logs / "operator.log",
        resync=Config().resync_seconds,
        helm_parallel=Config().helm_parallel,
        rollout_window=16,
        extra_args=["--namespace", namespace, "--leader-elect=false"],
    )
    operator.start()
    result: dict[str, Any] = {"started": stamp, "growths": []}
    try:
        body = {
            "apiVersion": "myapp.example.com/v1",
            "kind": "MyDatabase",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 2,
                "version": "15.2",
                "storage": "1Gi",
                "storageAutoGrow": {"thresholdPercent": 80, "increment": "50%", "limit": "4Gi", "intervalSeconds": 0},
            },
        }
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
        wait("Ready", lambda: (database(cluster, namespace).get("status") or {}).get("ready") is True, 600)
        pods = [f"{NAME}-0", f"{NAME}-1"]
        for number in range(1, ctx.growths + 1):
            growth = one_growth(cluster, namespace, number, pods)
            log(f"growth {number}: {growth}")
            result["growths"].append(growth)
        for step in STEPS:
            result[step] = figures([g["seconds"][step] for g in result["growths"]])
    finally:
        cluster.kubectl("delete", "-n", namespace, "mydb", "--all", "--wait=true", "--timeout=180s", check=False)
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    path = Path(ctx.out) / f"{stamp}-autogrow.json"
    path.write_text(json.dumps(result, indent=1))
    for step in STEPS:
        print(f"threshold crossed -> {step} (s): {result.get(step)}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
