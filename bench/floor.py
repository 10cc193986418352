"""The floor: the operator's own rendered manifests applied directly, with no operator in between.

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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import yaml

from mydb_operator.desired.credentials import credentials_secret

from .process import REPO

FIELD_MANAGER = "mydb-bench-floor"


def render(cr: dict, namespace: str, env: dict[str, str], workdir: Path) -> str:
    path = workdir / f"{cr['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(cr))
    result = subprocess.run([sys.executable, "-m", "mydb_operator.cli", "render", "-f", str(path),
                             "--namespace", namespace], env=env, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"mydb-operator render failed: {result.stderr.strip()}")
    return result.stdout


def _comparable(text: str) -> list[str]:
    return [line for line in text.splitlines() if "checksum/" not in line]


def render_wave(crs: list[dict], namespace: str, env: dict[str, str], workdir: Path,
                log: Callable[[str], None]) -> tuple[dict[str, str], dict]:
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
            rendered = {cr["metadata"]["name"]: text for cr, text in zip(crs, texts)}
            method = "rendered each"
    documents = sum(1 for doc in yaml.safe_load_all(template) if doc)
    return rendered, {"method": method, "objects_per_database": documents + 1,  # + the credentials Secret
                      "render_seconds": round(time.monotonic() - started, 2)}


def apply_wave(rendered: dict[str, str], namespace: str, kubectl: str, kubeconfig: Path, parallel: int,
               env: dict[str, str]) -> tuple[dict[str, float], dict[str, str]]:
    """kubectl apply --server-side each database's Secret + manifests, `parallel` at a time.

    Returns (name -> time.monotonic() its apply returned, name -> error)."""
    finished: dict[str, float] = {}
    errors: dict[str, str] = {}

    def one(name: str) -> None:
        secret = credentials_secret(namespace, name)
        stream = json.dumps(secret) + "\n---\n" + rendered[name]
        result = subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig}", "apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
             "-n", namespace, "-f", "-"], input=stream, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            errors[name] = result.stderr.strip()[-500:]
        finished[name] = time.monotonic()

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, rendered))
    return finished, errors


def render_env(helm: str, bin_dir: str, home: Path) -> dict[str, str]:
    return {**os.environ, "MYDB_HELM": helm, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data")}
