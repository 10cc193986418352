"""The seed database on real pods: PostgreSQL streams, and the Services route by role.

The operator runs as in the other e2e tests (a process under its
ServiceAccount, one namespace), with the platform configuration of
examples/platform-local-node.yaml: the database's pods land on the real node
and pull the Debian-built PostgreSQL from the loopback registry.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from .conftest import operator_instead, wait_ready
from .realnode import NODE_NAME, REGISTRY, REPO
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e
PLATFORM = REPO / "examples" / "platform-local-node.yaml"
SEED = yaml.safe_load((REPO / "examples" / "production-db.yaml").read_text())


@pytest.fixture
def real_operator(operator, namespace, tmp_path):
    """An operator for this namespace whose platform config puts databases on the real node."""
    platform = tmp_path / "platform.yaml"
    config = yaml.safe_load(PLATFORM.read_text())
    config["values"]["image"]["registry"] = REGISTRY  # the cluster's port base may differ from the example's
    platform.write_text(yaml.safe_dump(config))
    with operator_instead(operator, namespace, "operator-real-postgres.log",
                          MYDB_PLATFORM_CONFIG=str(platform)) as own:
        yield own


def sql(cluster, namespace: str, pod: str, query: str, *, host: str = "127.0.0.1") -> str:
    """Run QUERY with psql inside POD as the database's superuser, over TCP (scram, as clients do)."""
    line = f'PGPASSWORD="$POSTGRES_PASSWORD" psql -h {host} -U "$POSTGRES_USER" -d postgres -Atc "{query}"'
    result = cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "sh", "-c", line, check=False)
    assert result.returncode == 0, f"{pod}: {query}: {result.stderr}"
    return result.stdout.strip()


def test_seed_streams_on_real_pods(cluster, real_operator, namespace):
    """3 real pods, ordinal 0 primary, both replicas streaming; a row written on the primary reaches every replica;
    the read-write Service lands on the primary, the read-only one on replicas only; the Secret's URIs work."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(SEED))
    wait_ready(cluster, namespace, "production-db", timeout=300)

    pods = {p["metadata"]["name"]: p for p in get_json(cluster, "-n", namespace, "pods", "-l",
                                                         "app.kubernetes.io/instance=production-db")["items"]}
    members = sorted(name for name in pods if name.startswith("production-db-") and name[-1].isdigit())
    assert members == ["production-db-0", "production-db-1", "production-db-2"]
    assert all(pods[name]["spec"]["nodeName"] == NODE_NAME for name in members)
    assert all(pods[name]["spec"]["containers"][0]["image"].startswith(f"{REGISTRY}/library/postgres:15.2")
               for name in members)
    assert pods["production-db-0"]["metadata"]["labels"]["myapp.example.com/role"] == "primary"

    primary, replicas = "production-db-0", members[1:]
    assert sql(cluster, namespace, primary, "select pg_is_in_recovery()") == "f"
    for replica in replicas:
        assert sql(cluster, namespace, replica, "select pg_is_in_recovery()") == "t"
    streaming = wait_for("both replicas streaming", lambda: sql(
        cluster, namespace, primary, "select count(*) from pg_stat_replication where state = 'streaming'") == "2",
        timeout=60)
    assert streaming

    sql(cluster, namespace, primary, "create table seen (id int primary key, note text); "
                                     "insert into seen values (1, 'written on the primary')")
    for replica in replicas:
        wait_for(f"the row on {replica}", lambda: sql(cluster, namespace, replica, "select note from seen")
                 == "written on the primary", timeout=30)

    # Many connections through each Service: which kind of server answers.
    def answers(service: str) -> set[str]:
        query = "select pg_is_in_recovery()"
        return {sql(cluster, namespace, replicas[0], query, host=f"{service}.{namespace}.svc.cluster.local")
                for _ in range(12)}
    assert answers("production-db") == {"f"}
    assert answers("production-db-ro") == {"t"}

    secret = get_json(cluster, "-n", namespace, "secret", "production-db-credentials")["data"]
    for key, in_recovery in (("uri", "f"), ("uri-ro", "t")):
        uri = base64.b64decode(secret[key]).decode()
        result = cluster.kubectl("exec", "-n", namespace, primary, "-c", "postgres", "--",
                                 "psql", uri, "-Atc", "select pg_is_in_recovery()", check=False)
        assert result.returncode == 0 and result.stdout.strip() == in_recovery, (key, result.stderr)


def test_database_elsewhere_stays_on_kwok(cluster, operator, namespace):
    """Without the platform config (the shared test operator), a database keeps running on the kwok nodes."""
    spec = {**SEED["spec"], "replicas": 1}
    body = {**SEED, "metadata": {"name": "simulated"}, "spec": spec}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    wait_ready(cluster, namespace, "simulated", timeout=120)
    node = get_json(cluster, "-n", namespace, "pod", "simulated-0")["spec"]["nodeName"]
    assert node.startswith("kwok-node-")

