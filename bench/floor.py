"""The floor: the operator's own rendered manifests applied directly, with no operator in between.

Two ways: the floor proper, one long-lived client applying every object with
server-side apply at a tuned concurrency (the fastest honest way to create the
same objects), and "a person with kubectl": `kubectl apply --server-side` per
database, a few at a time, which mostly measures kubectl's start-up.

Every database in a wave has the same spec and differs only in its name, so
the chart is rendered once (`mydb-operator render`, exactly what the operator
would apply) and the name substituted; a second real render (the last name)
checks that substitution reproduces it, except the checksum/scripts pod
annotation (a hash over the scripts ConfigMap, which holds the name), which
changes no pod's behaviour. If anything else differs, every name is rendered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from mydb_operator.desired.credentials import credentials_secret

REPO = Path(__file__).resolve().parent.parent  # not from .process: the pure tests run without psutil

FIELD_MANAGER = "mydb-bench-floor"


def render(cr: dict[str, Any], namespace: str, env: dict[str, str], workdir: Path) -> str:
    path = workdir / f"{cr['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(cr))
    result = subprocess.run(
        [sys.executable, "-m", "mydb_operator.cli", "render", "-f", str(path), "--namespace", namespace],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"mydb-operator render failed: {result.stderr.strip()}")
    return result.stdout


def _comparable(text: str) -> list[str]:
    return [line for line in text.splitlines() if "checksum/" not in line]


def render_wave(
    crs: list[dict[str, Any]], namespace: str, env: dict[str, str], workdir: Path, log: Callable[[str], None]
) -> tuple[dict[str, str], dict[str, Any]]:
    """{name: manifests} for every CR, and how they were made."""
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    first = crs[0]["metadata"]["name"]
    template = render(crs[0], namespace, env, workdir)
    rendered = {cr["metadata"]["name"]: template.replace(first, cr["metadata"]["name"]) for cr in crs}
    method = "rendered once, name substituted"
    if len(crs) > 1:
        last = crs[-1]["metadata"]["name"]
        if _comparable(render(crs[-1], namespace, env, workdir)) != _comparable(rendered[last]):
            log("floor: name substitution does not reproduce a real render; rendering every database")
            with ThreadPoolExecutor(max_workers=2) as pool:
                texts = list(pool.map(lambda cr: render(cr, namespace, env, workdir), crs))
            rendered = {cr["metadata"]["name"]: text for cr, text in zip(crs, texts, strict=True)}
            method = "rendered each"
    documents = sum(1 for doc in yaml.safe_load_all(template) if doc)
    return rendered, {
        "method": method,
        "objects_per_database": documents + 1,  # + the credentials Secret
        "render_seconds": round(time.monotonic() - started, 2),
    }


# "A person with kubectl": kubectl apply processes at once, as the first floor had them.
KUBECTL_PROCESSES = 4


def apply_wave(
    rendered: dict[str, str], namespace: str, kubectl: str, kubeconfig: Path, parallel: int, env: dict[str, str]
) -> tuple[dict[str, float], dict[str, str]]:
    """kubectl apply --server-side each database's Secret + manifests, `parallel` at a time.

    Returns (name -> time.monotonic() its apply returned, name -> error)."""
    finished: dict[str, float] = {}
    errors: dict[str, str] = {}

    def one(name: str) -> None:
        secret = credentials_secret(namespace, name)
        stream = json.dumps(secret) + "\n---\n" + rendered[name]
        result = subprocess.run(
            [
                kubectl,
                f"--kubeconfig={kubeconfig}",
                "apply",
                "--server-side",
                f"--field-manager={FIELD_MANAGER}",
                "-n",
                namespace,
                "-f",
                "-",
            ],
            input=stream,
            capture_output=True,
            text=True,
            env=env,
        )
        if result.returncode != 0:
            errors[name] = result.stderr.strip()[-500:]
        finished[name] = time.monotonic()

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, rendered))
    return finished, errors


def render_env(helm: str, bin_dir: str, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MYDB_HELM": helm,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def object_path(obj: dict[str, Any], namespace: str) -> str:
    """The API path of a namespaced object, from its apiVersion, kind and name."""
    group_version = obj["apiVersion"]
    prefix = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    kind = obj["kind"].lower()
    plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "es" if kind.endswith("s") else kind + "s"
    return f"{prefix}/namespaces/{namespace}/{plural}/{obj['metadata']['name']}"


def wave_objects(rendered: dict[str, str], namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """(database, object) in apply order: each database's Secret, then its manifests as rendered."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, text in rendered.items():
        out.append((name, credentials_secret(namespace, name)))
        out.extend((name, doc) for doc in yaml.safe_load_all(text) if doc)
    return out


def apply_wave_ssa(
    rendered: dict[str, str], namespace: str, api: kubernetes.client.ApiClient, concurrency: int
) -> tuple[dict[str, float], dict[str, str]]:
    """Server-side apply of every object from one client, `concurrency` requests in flight.

    Returns (name -> time.monotonic() its last object was applied, name -> error)."""
    objects = wave_objects(rendered, namespace)
    left = {name: 0 for name in rendered}
    for name, _ in objects:
        left[name] += 1
    finished: dict[str, float] = {}
    errors: dict[str, str] = {}
    lock = threading.Lock()

    def one(item: tuple[str, dict[str, Any]]) -> None:
        name, obj = item
        url = f"{api.configuration.host}{object_path(obj, namespace)}?fieldManager={FIELD_MANAGER}&force=true"
        response = api.call_api(
            "PATCH",
            url,
            body=json.dumps(obj),
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        )
        answer = response.read()  # drains the stream, so the connection goes back to the pool
        if response.status >= 400:
            errors[name] = f"{obj['kind']} {obj['metadata']['name']}: {response.status} {answer[:300]!r}"
        with lock:
            left[name] -= 1
            if left[name] == 0:
                finished[name] = time.monotonic()

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, objects))
    return finished, errors
