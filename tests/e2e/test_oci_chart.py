"""A chart from an OCI registry: the project's charts published to the local cluster's registry
(hack/publish-charts.sh), then pulled once by an operator at start-up and run like a directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, operator_instead, wait_ready
from .realnode import REGISTRY
from .test_operator import apply_db
from .waiting import get_json

pytestmark = pytest.mark.e2e
REFERENCE = f"oci://{REGISTRY}/charts/mydatabase"


@pytest.mark.own_operator
def test_an_oci_chart_is_pulled_once_and_runs_like_a_directory(cluster, operator, namespace, published):
    """MYDB_CHART_DIR=oci://..., MYDB_CHART_VERSION, MYDB_CHART_PLAIN_HTTP: the operator pulls that
    version, checks it at start-up and installs from it; status names the OCI chart's version."""
    with operator_instead(operator, namespace, "operator-e2e-oci.log", MYDB_CHART_DIR=REFERENCE,
                          MYDB_CHART_VERSION=published, MYDB_CHART_PLAIN_HTTP="true") as own:
        # The chart the operator loaded is the pulled one, under Helm's cache, not charts/mydatabase.
        loaded = re.search(r"chart (\S+) \(digest ", own.log_since_start())
        assert loaded, own.log_since_start()
        pulled = Path(loaded.group(1))
        assert pulled.parent.parent == own.log_path.parent / "helm-cache" / "mydb-operator-charts", pulled
        assert pulled.parent.name.startswith(f"mydatabase-{published}-")

        apply_db(cluster, namespace, "from-oci", {"replicas": 1, "version": "15.2", "storage": "1Gi"})
        wait_ready(cluster, namespace, "from-oci")
        release = get_json(cluster, "-n", namespace, "mydb", "from-oci")["status"]["release"]
        assert release["chart"] == f"mydatabase-{published}"
        assert release["revision"] >= 1


def test_an_unknown_chart_version_stops_the_operator_at_start_up(cluster, operator, namespace, published,
                                                                 tmp_path):
    """--chart-version 9.9.9 is not in the registry: one line naming the reference, the version and
    Helm's reason, exit status 1, before the operator touches the cluster."""
    env = {**os.environ, "KUBECONFIG": str(operator.kubeconfig), "HELM_CACHE_HOME": str(tmp_path / "cache"),
           "HELM_CONFIG_HOME": str(tmp_path / "config"), "PATH": f"{cluster.bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "mydb_operator.cli", "--helm", cluster.tool("helm"), "--chart", REFERENCE,
         "--chart-version", "9.9.9", "--chart-plain-http", "run", "-n", namespace, "--health-port", "0",
         "--metrics-port", "0"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"mydb-operator: cannot pull the chart {REFERENCE} version 9.9.9: "), lines[0]
    assert "not found" in lines[0], lines[0]
    # Nothing of the failed pull is left behind.
    assert list((tmp_path / "cache" / "mydb-operator-charts").iterdir()) == []
