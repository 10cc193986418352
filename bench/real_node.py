"""The seed database on the real node: the operator against the floor, from apply to Ready on real pods.

    .venv/bin/python -m bench.real_node [--runs 3]          (make bench-real-node)

Needs the local cluster with its real node and the images in its registry: run
`make demo` first (or `hack/cluster.py up` and `hack/images.sh push`). Each run
has two turns, each in a fresh namespace, with the seed spec
(examples/production-db.yaml) and the platform config that puts databases on
the real node (examples/platform-local-node.yaml, pointed at the registry):

- operator: `mydb-operator run` (from this checkout) watching that namespace,
  the seed CR applied; timed until its StatefulSet has 3 ready pods and until
  the MyDatabase is Ready;
- floor: the same manifests (`mydb-operator render`, which is what the
  operator applies) and a credentials Secret, applied with
  `kubectl apply --server-side`; timed until the StatefulSet has 3 ready pods.

Turns alternate (operator, floor, operator, ...), so neither always runs on a
warmer node. The issue's target: the operator within 1.1x of the floor.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes.client.exceptions import ApiException

from mydb_operator.config import Config
from mydb_operator.desired.credentials import credentials_secret

from . import floor, kube, report
from .measure import log
from .process import REPO, OperatorProcess
from .setup import bin_dir

SEED = REPO / "examples" / "production-db.yaml"
PLATFORM = REPO / "examples" / "platform-local-node.yaml"
HOST_IP = "198.18.128.1"  # the host on the real nodes' bridge (hack/node_layout.py)


def platform_config(registry: str, folder: Path) -> Path:
    """The real nodes' platform config, pointed at REGISTRY. The operator runs on the host: its address on the
    nodes' bridge is no node's own, so the databases' NetworkPolicy admits it by name."""
    config = yaml.safe_load(PLATFORM.read_text())
    config["values"]["image"]["registry"] = registry
    config["values"]["networkPolicy"] = {"operator": [{"ipBlock": {"cidr": f"{HOST_IP}/32"}}]}
    path = folder / "platform.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> float:
    """Seconds on time.monotonic() when check() first held; raises after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def statefulset_ready(cluster: kube.Cluster, namespace: str, name: str) -> bool:
    try:
        # _preload_content=False: the HTTP response, not the V1StatefulSet the client's annotation names.
        response: Any = cluster.apps.read_namespaced_stateful_set(name, namespace, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return kube.statefulset_ready(json.loads(response.data))


def database_ready(cluster: kube.Cluster, namespace: str, name: str) -> bool:
    obj = cluster.custom.get_namespaced_custom_object(kube.GROUP, kube.VERSION, namespace, kube.PLURAL, name)
    return kube.cr_ready(cast(dict[str, Any], obj), 1)  # the decoded JSON, annotated as object


def database_exists(cluster: kube.Cluster, namespace: str, name: str) -> bool:
    try:
        cluster.custom.get_namespaced_custom_object(kube.GROUP, kube.VERSION, namespace, kube.PLURAL, name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def kubectl_apply(ctx: argparse.Namespace, namespace: str, stream: str) -> None:
    subprocess.run(
        [
            f"{ctx.bins}/kubectl",
            f"--kubeconfig={ctx.cluster.kubeconfig}",
            "apply",
            "--server-side",
            f"--field-manager={floor.FIELD_MANAGER}",
            "-n",
            namespace,
            "-f",
            "-",
        ],
        input=stream,
        check=True,
        capture_output=True,
        text=True,
    )


def operator_turn(ctx: argparse.Namespace, namespace: str, seed: dict[str, Any]) -> dict[str, float]:
    name = seed["metadata"]["name"]
    operator = OperatorProcess(
        ctx.cluster.kubeconfig,
        f"{ctx.bins}/helm",
        ctx.bins,
        ctx.logs / f"{namespace}.log",
        resync=60,
        helm_parallel=Config().helm_parallel,
        rollout_window=16,
        extra_args=["--namespace", namespace, "--leader-elect=false"],
    )
    operator.start()
    try:
        t0 = time.monotonic()
        kubectl_apply(ctx, namespace, json.dumps(seed))
        pods = wait_until(
            "the operator's StatefulSet ready", lambda: statefulset_ready(ctx.cluster, namespace, name), ctx.timeout
        )
        ready = wait_until("the MyDatabase Ready", lambda: database_ready(ctx.cluster, namespace, name), ctx.timeout)
        return {"pods_ready": round(pods - t0, 2), "ready": round(ready - t0, 2)}
    finally:  # deleted while its operator runs: its finalizer would keep the namespace terminating
        ctx.cluster.custom.delete_namespaced_custom_object(kube.GROUP, kube.VERSION, namespace, kube.PLURAL, name)
        wait_until("the MyDatabase deleted", lambda: not database_exists(ctx.cluster, namespace, name), 120)
        operator.stop()


def floor_turn(ctx: argparse.Namespace, namespace: str, seed: dict[str, Any]) -> dict[str, float]:
    name = seed["metadata"]["name"]
    manifests = floor.render(seed, namespace, ctx.render_env, ctx.logs)
    stream = json.dumps(credentials_secret(namespace, name)) + "\n---\n" + manifests
    t0 = time.monotonic()
    kubectl_apply(ctx, namespace, stream)
    pods = wait_until(
        "the floor's StatefulSet ready", lambda: statefulset_ready(ctx.cluster, namespace, name), ctx.timeout
    )
    return {"pods_ready": round(pods - t0, 2)}


Turn = Callable[[argparse.Namespace, str, dict[str, Any]], dict[str, float]]


def in_namespace(ctx: argparse.Namespace, namespace: str, turn: Turn, seed: dict[str, Any]) -> dict[str, float]:
    """One turn in a namespace of its own, deleted afterwards."""
    ctx.cluster.create_namespace(namespace)
    try:
        return turn(ctx, namespace, seed)
    finally:
        if not ctx.cluster.delete_namespace(namespace, 300, log):
            log(f"{namespace} still terminating after 300s; going on")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.real_node", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="operator and floor turns each (default 3)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for Ready (default 300)")
    parser.add_argument("--out", default=str(REPO / "bench-results"), help="folder for the JSON results")
    ctx = parser.parse_args(argv)
    cluster_dir = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO / ".cluster"))
    registry = f"127.0.0.1:{os.environ.get('MYDB_CLUSTER_PORT_BASE', '16400')}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    ctx.cluster = kube.Cluster(cluster_dir)
    ctx.bins = bin_dir()
    ctx.logs = Path(ctx.out) / f"{stamp}-real-node-logs"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    config = platform_config(registry, Path(tempfile.mkdtemp(prefix="mydb-bench-real-")))
    os.environ["MYDB_PLATFORM_CONFIG"] = str(config)  # the operator and render both read it
    ctx.render_env = floor.render_env(f"{ctx.bins}/helm", ctx.bins, ctx.logs / "render-home")
    seed = yaml.safe_load(SEED.read_text())
    turns: dict[str, list[dict[str, float]]] = {"operator": [], "floor": []}
    for run in range(1, ctx.runs + 1):
        for who, turn in (("operator", operator_turn), ("floor", floor_turn)):
            namespace = f"bench-real-{stamp.lower()[:15]}-{run}-{who}"
            log(f"run {run}: {who} in {namespace}")
            result = in_namespace(ctx, namespace, turn, seed)
            log(f"run {run}: {who}: {result}")
            turns[who].append(result)
    summary = report.real_node_summary(turns)
    results = {
        "started": stamp,
        "seed": seed["spec"],
        "platform": yaml.safe_load(config.read_text()),
        "turns": turns,
        "summary": summary,
    }
    path = Path(ctx.out) / f"{stamp}-real-node.json"
    path.write_text(json.dumps(results, indent=1))
    for key, value in summary.items():
        print(f"{key:>42}: {value}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
