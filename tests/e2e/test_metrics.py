"""The operator's /metrics move with its work: reconciles, Helm runs and their durations, phases."""

from __future__ import annotations

import time
import urllib.request

import pytest

from .conftest import operator_instead, wait_ready
from .test_operator import apply_db
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


@pytest.mark.own_operator
def test_metrics_count_reconciles_and_helm_runs(cluster, operator, namespace):
    """After one new database: more ok reconciles, exactly one more successful helm upgrade, one Running
    database. An operator of this namespace alone, so no other test's database moves the figures."""
    with operator_instead(operator, namespace, "operator-e2e-metrics.log") as own:
        before = scrape(own.metrics_port)
        apply_db(cluster, namespace, "measured", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "measured")
        # The gauge moves when the reconcile that wrote Ready resumes after its status patch, which
        # kubectl may see first.
        running = 'mydb_databases{phase="Running"}'
        after = wait_for("one Running database in the gauge",
                         lambda: (m := scrape(own.metrics_port)).get(running) == 1 and m, timeout=10)

    def moved(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)
    assert moved('mydb_helm_invocations_total{command="upgrade",result="success"}') == 1
    assert moved('mydb_reconciles_total{result="ok"}') >= 1
    assert moved("mydb_reconcile_duration_seconds_count") >= 1
    assert moved('mydb_helm_duration_seconds_count{command="upgrade"}') == 1
    assert moved('mydb_helm_duration_seconds_sum{command="upgrade"}') > 0
    assert moved("mydb_status_patches_total") >= 1


@pytest.mark.long
@pytest.mark.own_operator
def test_idle_resyncs_read_the_informers_cache_and_drift_is_confirmed_on_the_api(cluster, operator, namespace):
    """A Ready database's resyncs look at the informers' cache: no API read, no Helm run, no status write.

    A hand edit is still seen (from the cache) and repaired, after one fresh read from the API."""
    # Resyncs every 4 s: the quiet window below (2.5 of them) stays short.
    with operator_instead(operator, namespace, "operator-e2e-idle.log", resync=4) as own:
        apply_db(cluster, namespace, "quiet", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "quiet")
        time.sleep(2)  # the last pod events settle
        before = scrape(own.metrics_port)
        time.sleep(2.5 * own.resync)
        after = scrape(own.metrics_port)

        def moved(name: str, since: dict[str, float] = before, until: dict[str, float] = after) -> float:
            return until.get(name, 0) - since.get(name, 0)
        assert moved('mydb_observations_total{source="cache"}') >= 2
        assert moved('mydb_observations_total{source="api"}') == 0
        assert moved('mydb_helm_invocations_total{command="upgrade",result="success"}') == 0
        assert moved("mydb_status_patches_total") == 0

        cluster.kubectl("scale", "-n", namespace, "statefulset/quiet", "--replicas=1")
        wait_for("the hand edit reverted",
                 lambda: get_json(cluster, "-n", namespace, "statefulset", "quiet")["spec"]["replicas"] == 2)
        upgrades = 'mydb_helm_invocations_total{command="upgrade",result="success"}'

        def counted() -> dict[str, float] | None:
            # Helm's patch lands before its run ends (the release record comes last) and is counted.
            now = scrape(own.metrics_port)
            return now if moved(upgrades, after, now) >= 1 else None
        repaired = wait_for("the repairing Helm run counted", counted, timeout=30)
        assert moved('mydb_observations_total{source="api"}', after, repaired) >= 1
        assert moved(upgrades, after, repaired) == 1


@pytest.mark.own_operator
def test_a_first_install_needs_no_api_observation_and_an_upgrade_one(cluster, operator, namespace):
    """A first install onto nothing prepares Helm from the cache (Helm runs whatever a read shows);
    a change to an existing database is decided again on a fresh API read before Helm. After
    Helm, one GET of the StatefulSet, then the cache once it shows that version, makes the status."""
    with operator_instead(operator, namespace, "operator-e2e-reads.log") as own:
        apply_db(cluster, namespace, "warm", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "warm")  # the informers have listed: the cache can answer
        before = scrape(own.metrics_port)
        apply_db(cluster, namespace, "fresh", {"replicas": 2, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "fresh")
        installed = scrape(own.metrics_port)

        def moved(name: str, since: dict[str, float], until: dict[str, float]) -> float:
            return until.get(name, 0) - since.get(name, 0)
        assert moved('mydb_helm_invocations_total{command="upgrade",result="success"}', before, installed) == 1
        assert moved('mydb_observations_total{source="api"}', before, installed) == 0

        apply_db(cluster, namespace, "fresh", {"replicas": 2, "version": "15.2", "storage": "1Gi",
                                               "backup": {"schedule": "0 3 * * *"}})

        def upgraded() -> bool:
            db = get_json(cluster, "-n", namespace, "mydb", "fresh")
            status = db.get("status") or {}
            ready = {c["type"]: c["status"] for c in status.get("conditions") or []}.get("Ready")
            return ((status.get("release") or {}).get("revision") == 2 and ready == "True"
                    and status.get("observedGeneration") == db["metadata"]["generation"])
        wait_for("the upgrade Ready", upgraded)
        upgraded_at = scrape(own.metrics_port)
        assert moved('mydb_helm_invocations_total{command="upgrade",result="success"}', installed, upgraded_at) == 1
        assert moved('mydb_observations_total{source="api"}', installed, upgraded_at) == 1
