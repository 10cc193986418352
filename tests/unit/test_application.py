"""The application's role, database and Secret (reconcile/application.py) against a fake API, the SQL on the
primary stood in for (tests/e2e proves it on real pods): made once, kept, a changed password carried to the
role, nothing of anyone else's written, no SQL while nothing changed."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from fake_api import FakeApi, make_runtime, run
from test_reconcile_orchestrator import FakeHelm

from mydb_operator import names
from mydb_operator.desired.application import application_keys
from mydb_operator.instances import commands
from mydb_operator.model.errors import SpecError
from mydb_operator.model.instances import InstanceFacts, Unreachable
from mydb_operator.model.spec import parse_spec
from mydb_operator.reconcile.application import keep_application

SPEC = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi", "tls": {"enabled": False}})
PODS = [{"metadata": {"name": "db-0"}, "status": {"podIP": "198.18.128.5"}, "spec": {}}]
PRIMARY = {"db-0": InstanceFacts("db-0", False, 1, 100)}


def encoded(values: dict[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


@pytest.fixture
def api() -> FakeApi:
    made = FakeApi()
    made.secrets[("ns", "db-credentials")] = {"metadata": {"name": "db-credentials", "namespace": "ns"},
                                              "data": encoded({"username": "postgres", "password": "su"})}
    return made


@pytest.fixture
def sql(monkeypatch) -> list[tuple]:
    """keep_owner's calls (owner, database, password); it answers what the test puts in `answers`."""
    calls: list[tuple] = []

    async def keep_owner(server, login, owner, database, password):
        calls.append((server.pod, owner, database, password))
        return ["role app created"] if len(calls) == 1 else []
    monkeypatch.setattr(commands, "keep_owner", keep_owner)
    return calls


def keep(api: FakeApi, previous: dict | None = None, spec=SPEC, probes=PRIMARY):
    runtime = make_runtime(FakeHelm(), api=api)
    return run(keep_application("ns", "db", spec, {"application": previous or {}}, None, dict(probes), PODS, runtime))


def test_the_first_pass_makes_the_secret_the_role_and_the_database(api, sql):
    first = keep(api)
    secret = api.secrets[("ns", "db-app")]
    assert secret["type"] == "kubernetes.io/basic-auth"
    assert secret["metadata"]["labels"][names.MANAGED_BY_LABEL] == names.OPERATOR_NAME
    keys = decoded(secret)
    password = keys["password"]
    assert len(password) >= 32 and keys == application_keys(
        "app", password, "app", ("db.ns.svc", "db-ro.ns.svc"), names.POSTGRES_PORT, b"")
    assert keys["uri"] == f"postgresql://app:{password}@db.ns.svc:5432/app"
    assert keys["pgpass"] == f"db.ns.svc:5432:app:app:{password}\n"
    assert sql == [("db-0", "app", "app", password)]
    assert first.status["ready"] is True and first.status["secretName"] == "db-app"
    assert [e[1] for e in first.events] == ["ApplicationSecretCreated", "ApplicationKept"]

    # The Secret's version differs from the pass that made it: SQL once more (it finds nothing to do) ...
    secret["metadata"]["resourceVersion"] = "11"
    second = keep(api, first.status)
    assert len(sql) == 2 and second.events == [] and second.status["ready"] is True
    # ... and then none while nothing changes.
    api.writes.clear()
    third = keep(api, second.status)
    assert len(sql) == 2 and third.status == second.status and api.writes == []


def test_a_password_changed_in_the_secret_reaches_the_role_and_every_key_follows(api, sql):
    done = keep(api)
    secret = api.secrets[("ns", "db-app")]
    secret["data"]["password"] = base64.b64encode(b"chosen:by\\me").decode()
    secret["metadata"]["resourceVersion"] = "12"
    keep(api, done.status)
    keys = decoded(secret)
    assert sql[-1] == ("db-0", "app", "app", "chosen:by\\me")
    assert keys["uri"] == "postgresql://app:chosen%3Aby%5Cme@db.ns.svc:5432/app"
    assert keys["pgpass"] == "db.ns.svc:5432:app:app:chosen\\:by\\\\me\n"


def test_a_foreign_secret_is_reported_once_and_never_written(api, sql):
    foreign = {"metadata": {"name": "db-app", "namespace": "ns", "labels": {"app": "web"}},
               "data": encoded({"password": "theirs"})}
    api.secrets[("ns", "db-app")] = dict(foreign)
    said = keep(api)
    assert said.status["ready"] is False and said.status["message"].startswith("Secret db-app in namespace ns")
    assert [e[:2] for e in said.events] == [("Warning", "SecretNameTaken")]
    assert keep(api, said.status).events == []  # once
    assert api.secrets[("ns", "db-app")] == foreign and sql == [] and api.writes == []


def test_nothing_is_read_or_run_until_the_primary_answers(api, sql):
    known = {"owner": "app", "ready": True, "appliedFrom": "x"}
    for probes in ({}, {"db-0": Unreachable("db-0", "no answer")}, {"db-0": InstanceFacts("db-0", True, 1, 5)}):
        api.reads.clear()
        assert keep(api, known, probes=probes).status == known
        assert api.reads == [] and sql == []


def test_sql_that_fails_says_why_in_status_with_one_warning(api, monkeypatch):
    async def refused(*_):
        raise OSError("connection refused")
    monkeypatch.setattr(commands, "keep_owner", refused)
    said = keep(api)
    assert said.status["ready"] is False
    assert said.status["message"] == "role app and database app not kept on db-0: connection refused"
    assert [e[1] for e in said.events] == ["ApplicationSecretCreated", "ApplicationNotKept"]
    assert [e[1] for e in keep(api, said.status).events] == []


def test_the_names_come_from_the_spec(api, sql):
    spec = parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "tls": {"enabled": False},
                       "application": {"owner": "shop", "database": "orders"}})
    done = keep(api, spec=spec)
    assert sql[0][1:3] == ("shop", "orders") and decoded(api.secrets[("ns", "db-app")])["dbname"] == "orders"
    assert (done.status["owner"], done.status["database"]) == ("shop", "orders")



@pytest.mark.parametrize("section, field_path", [
    ({"owner": "postgres"}, "application.owner"), ({"owner": "pg_monitor"}, "application.owner"),
    ({"owner": "App"}, "application.owner"), ({"database": "template1"}, "application.database"),
    ({"database": "a-b"}, "application.database"), ({"database": "x" * 64}, "application.database"),
])
def test_names_postgresql_or_the_operator_keep_are_refused(section, field_path):
    with pytest.raises(SpecError) as refused:
        parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "application": section})
    assert refused.value.field == field_path
