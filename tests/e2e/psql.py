"""SQL on a database pod's own server from the test process: the host's psql over TCP to the pod's address.

A `kubectl exec POD -- psql` cost about 0.15 s of CPU (kubectl, the API server, the kubelet, the runtime's
exec), and the e2e tests made some 450 of them a run on 2 cores; psql from the host costs 0.04 s. The server
sees it as it sees an application: TCP from outside the pod, TLS when the chart asks for it (sslmode prefer),
scram with the superuser's credentials, read from the Secret the pod mounts (or, before chart 0.2.0, from
the Secret its env vars name). The host reaches its pods' addresses; no traffic leaves the machine.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

from .waiting import get_json

# PostgreSQL 15's own client, as make test installs it for tests/postgres (hack/install-postgres.sh);
# not /usr/bin/psql, Debian's Perl wrapper, which costs more CPU than psql itself.
PSQL = str(Path(os.environ.get("MYDB_PG_BIN", "/usr/lib/postgresql/15/bin")) / "psql")


class Unreachable(Exception):
    """The pod has no address or no credentials to connect with (not there, not started, not a database's)."""


def run(cluster, namespace: str, pod: str, query: str, *, connect_timeout: int = 10,
        stop_on_error: bool = False) -> subprocess.CompletedProcess[str]:
    """psql -XAtq -c QUERY on POD's server as its superuser; a pod it cannot reach answers as a failed psql."""
    try:
        target, password = connection(cluster, namespace, pod, connect_timeout)
    except Unreachable as why:
        return subprocess.CompletedProcess([PSQL], 2, "", f"{namespace}/{pod}: {why}")
    command = [PSQL, target, "-XAtq", "-c", query, *(["-v", "ON_ERROR_STOP=1"] if stop_on_error else [])]
    env = {**os.environ, "PGPASSWORD": password, "PGAPPNAME": "e2e-tests"}
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def connection(cluster, namespace: str, pod: str, connect_timeout: int) -> tuple[str, str]:
    """POD's libpq connection string (without the password) and the superuser's password."""
    found = get_json(cluster, "-n", namespace, "pod", pod)
    address = (found.get("status") or {}).get("podIP")
    if not address:
        raise Unreachable("no pod address")
    container = postgres_container(found)
    env = {entry["name"]: entry for entry in container.get("env") or []}
    port = env.get("PGPORT", {}).get("value") or "5432"
    user, password = credentials(cluster, namespace, found["spec"], container, env)
    return (f"host={address} port={port} user={user} dbname=postgres sslmode=prefer "
            f"connect_timeout={connect_timeout}"), password


def postgres_container(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    return next((c for c in containers if c["name"] == "postgres"), containers[0])


def credentials(cluster, namespace: str, spec: dict[str, Any], container: dict[str, Any],
                env: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The superuser's name and password: the files of the Secret mounted at CREDENTIALS_DIR, as the chart
    gives them, or (a chart before 0.2.0) the POSTGRES_USER and POSTGRES_PASSWORD env vars' Secret keys."""
    directory = env.get("CREDENTIALS_DIR", {}).get("value")
    if directory:
        mounted = next((m["name"] for m in container.get("volumeMounts") or []
                        if Path(m["mountPath"]) == Path(directory)), None)
        volume = next((v for v in spec.get("volumes") or [] if v["name"] == mounted), {})
        name = (volume.get("secret") or {}).get("secretName")
        if not name:
            raise Unreachable(f"no Secret mounted at {directory}")
        data = secret(cluster, namespace, name)
        return data.get("username", ""), data.get("password", "")
    user, password = (from_env(cluster, namespace, env.get(key, {}))
                      for key in ("POSTGRES_USER", "POSTGRES_PASSWORD"))
    if not password:
        raise Unreachable("no credentials in the pod's spec")
    return user or "postgres", password


def from_env(cluster, namespace: str, entry: dict[str, Any]) -> str:
    if "value" in entry:
        return str(entry["value"])
    reference = (entry.get("valueFrom") or {}).get("secretKeyRef")
    return secret(cluster, namespace, reference["name"]).get(reference["key"], "") if reference else ""


def secret(cluster, namespace: str, name: str) -> dict[str, str]:
    data = get_json(cluster, "-n", namespace, "secret", name).get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}
