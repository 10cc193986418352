"""The operator's /metrics move with its work: reconciles, Helm runs and their durations, phases."""

from __future__ import annotations

import urllib.request

import pytest

from .conftest import wait_ready
from .test_operator import apply_db

pytestmark = pytest.mark.e2e


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_count_reconciles_and_helm_runs(cluster, operator, namespace):
    """After one new database: more ok reconciles, one more successful helm upgrade, a Running database."""
    before = scrape(operator.metrics_port)
    apply_db(cluster, namespace, "measured", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
    wait_ready(cluster, namespace, "measured")
    after = scrape(operator.metrics_port)

    def moved(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)
    assert moved('mydb_helm_invocations_total{command="upgrade",result="success"}') >= 1
    assert moved('mydb_reconciles_total{result="ok"}') >= 1
    assert moved("mydb_reconcile_duration_seconds_count") >= 1
    assert moved('mydb_helm_duration_seconds_count{command="upgrade"}') >= 1
    assert moved('mydb_helm_duration_seconds_sum{command="upgrade"}') > 0
    assert moved("mydb_status_patches_total") >= 1
    assert after['mydb_databases{phase="Running"}'] >= 1
