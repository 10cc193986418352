"""The application's role (spec.application) as a client sees it on real pods: its Secret's URI connects
verify-full through the read-write Service; it owns its database and nothing else."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess

from .waiting import get_json, wait_for

CA = "/etc/mydatabase/tls/ca.crt"  # the pods' mounted CA: a client's PGSSLROOTCERT


def secret_keys(cluster, namespace: str, name: str) -> dict[str, str]:
    data = get_json(cluster, "-n", namespace, "secret", name).get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def as_client(cluster, namespace: str, pod: str, uri: str, query: str) -> subprocess.CompletedProcess:
    """psql with URI from inside POD (its postgres container), as an application pod would connect."""
    return cluster.kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "env", f"PGSSLROOTCERT={CA}",
                           "psql", uri, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", query, check=False)


def refused(result: subprocess.CompletedProcess, words: str) -> bool:
    return result.returncode != 0 and words in result.stderr


def check_the_application_role(cluster, namespace: str, name: str, client_pod: str) -> dict[str, str]:
    """The role made by the operator: its Secret's keys, a verify-full login, a table of its own in its database;
    COPY TO PROGRAM, ALTER SYSTEM and another role's table refused. Returns the Secret's keys."""
    wait_for("status.application ready", lambda: (get_json(cluster, "-n", namespace, "mydb", name)["status"].get(
        "application") or {}).get("ready"), timeout=90)
    keys = secret_keys(cluster, namespace, f"{name}-app")
    assert {k: keys[k] for k in ("username", "dbname", "host", "port")} == {
        "username": "app", "dbname": "app", "host": f"{name}.{namespace}.svc", "port": "5432"}, keys
    assert keys["uri"].endswith("/app?sslmode=verify-full") and keys["ca.crt"].startswith("-----BEGIN CERTIFICATE")
    uri = keys["uri"]
    made = as_client(cluster, namespace, client_pod, uri, "create table if not exists mine (id int); "
                     "insert into mine values (1); select current_user || ' ' || current_database() || ' '"
                     " || (select ssl from pg_stat_ssl where pid = pg_backend_pid())")
    assert made.returncode == 0 and made.stdout.split()[-3:] == ["app", "app", "true"], (made.stdout, made.stderr)
    assert refused(as_client(cluster, namespace, client_pod, uri, "copy (select 1) to program 'true'"),
                   "pg_execute_server_program"), "COPY TO PROGRAM"
    assert refused(as_client(cluster, namespace, client_pod, uri, "alter system set work_mem = '8MB'"),
                   'permission denied to set parameter "work_mem"'), "ALTER SYSTEM"
    superuser = secret_keys(cluster, namespace, f"{name}-credentials")["uri"].replace("/postgres?", "/app?")
    theirs = as_client(cluster, namespace, client_pod, superuser, "create table if not exists theirs (id int)")
    assert theirs.returncode == 0, theirs.stderr
    assert refused(as_client(cluster, namespace, client_pod, uri, "select * from theirs"),
                   "permission denied for table theirs")
    return keys


def change_the_application_password(cluster, namespace: str, name: str, client_pod: str, primary: str) -> None:
    """A new password put in the Secret by hand: within a resync the role takes it (and the URIs follow); the
    old one is refused. With every statement logged on the primary meanwhile, the operator's ALTER ROLE carries
    a SCRAM verifier, and the password itself is in no line of the server's log."""
    old = secret_keys(cluster, namespace, f"{name}-app")
    superuser = secret_keys(cluster, namespace, f"{name}-credentials")["uri"]
    # One statement per call: psql -c runs several in one transaction, where ALTER SYSTEM may not run.
    for statement in ("alter system set log_statement = 'all'", "select pg_reload_conf()"):
        logged = as_client(cluster, namespace, client_pod, superuser, statement)
        assert logged.returncode == 0, logged.stderr
    password = "changed-" + secrets.token_hex(8)
    patch = {"data": {"password": base64.b64encode(password.encode()).decode()}}
    cluster.kubectl("patch", "-n", namespace, "secret", f"{name}-app", "-p", json.dumps(patch))
    new = wait_for("the URI with the new password", lambda: (lambda k: k if password in k["uri"] else None)(
        secret_keys(cluster, namespace, f"{name}-app")), timeout=60)
    wait_for("a login with the new password", lambda: as_client(cluster, namespace, client_pod, new["uri"],
                                                                 "select 1").returncode == 0, timeout=60)
    assert refused(as_client(cluster, namespace, client_pod, old["uri"], "select 1"), "password authentication failed")
    server_log = cluster.kubectl("logs", "-n", namespace, primary, "-c", "postgres", "--since=5m").stdout
    for statement in ("alter system reset log_statement", "select pg_reload_conf()"):
        reset = as_client(cluster, namespace, client_pod, superuser, statement)
        assert reset.returncode == 0, reset.stderr
    assert password not in server_log
    said = [line for line in server_log.splitlines() if "alter role" in line.lower()]
    assert said and all("SCRAM-SHA-256$4096:" in line for line in said), said
