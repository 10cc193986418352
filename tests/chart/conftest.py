"""Fixtures for the chart tests: locate the real helm binary and render the chart."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from manifests import documents

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mydatabase"
# A hang guard, not a time limit: under make test these tests run on the CPU the e2e pass leaves
# (hack/background.py), and a render may wait minutes for it.
HANG_SECONDS = 900


def find_helm() -> str | None:
    """MYDB_HELM, else the first ~/.cache/mydb-operator/bin/*/helm that exists."""
    env = os.environ.get("MYDB_HELM")
    if env:
        return env if os.access(env, os.X_OK) else None
    candidates = sorted(glob.glob(os.path.expanduser("~/.cache/mydb-operator/bin/*/helm")))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


@pytest.fixture(scope="session")
def helm_bin() -> str:
    helm = find_helm()
    if helm is None:
        pytest.fail(
            "helm not found: set MYDB_HELM to a helm binary or build it into "
            "~/.cache/mydb-operator/bin/<version>/helm (hack/build-tools.sh)",
            pytrace=False,
        )
    return helm


class Rendered:
    """Parsed `helm template` output, indexed by (kind, name)."""

    def __init__(self, text: str):
        self.text = text
        self.docs = documents(text)
        self.by_key = {(d["kind"], d["metadata"]["name"]): d for d in self.docs}
        assert len(self.by_key) == len(self.docs), "duplicate (kind, name) in output"

    def get(self, kind: str, name: str) -> dict:
        return self.by_key[(kind, name)]

    def kinds(self, kind: str) -> list[dict]:
        return [d for d in self.docs if d["kind"] == kind]


@pytest.fixture
def helm(helm_bin, tmp_path):
    """Run helm with the given args; values dicts are passed as -f files."""

    counter = iter(range(1_000_000))

    def run(*args: str, values: dict | None = None) -> subprocess.CompletedProcess:
        cmd = [helm_bin, *args]
        if values is not None:
            path = tmp_path / f"values-{next(counter)}.yaml"
            path.write_text(yaml.safe_dump(values))
            cmd += ["-f", str(path)]
        env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path / "cache"),
               "HELM_CONFIG_HOME": str(tmp_path / "config"),
               "HELM_DATA_HOME": str(tmp_path / "data")}
        return subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_SECONDS, env=env)

    return run


# The bundled chart's output for values already rendered in this process: a third of the renders repeat
# one (the seed's values, mostly), and the chart does not change while the tests run.
RENDERED: dict[tuple[str, str, str], str] = {}


@pytest.fixture
def render(helm):
    """helm template RELEASE charts/mydatabase; fails the test if helm fails."""

    def do(values: dict | None = None, *extra: str, release: str = "production-db",
           namespace: str = "prod") -> Rendered:
        key = (release, namespace, yaml.safe_dump(values, sort_keys=True))
        if extra or key not in RENDERED:  # extra arguments may name files, whose content a key cannot see
            res = helm("template", release, str(CHART), "--namespace", namespace, *extra,
                       values=values)
            assert res.returncode == 0, f"helm template failed:\n{res.stderr}"
            if extra:
                return Rendered(res.stdout)
            RENDERED[key] = res.stdout
        return Rendered(RENDERED[key])

    return do
