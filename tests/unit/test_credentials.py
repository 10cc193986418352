"""The credentials Secret: what desired/credentials.py makes, and how the reconcile ensures it
(reconcile/prerequisites.py) against a fake API: created once, never overwritten, a user's checked."""

from __future__ import annotations

import base64
import copy
from urllib.parse import urlsplit

from fake_api import FakeApi, run

from mydb_operator import names
from mydb_operator.desired.credentials import (
    REPLICATION_USER,
    REQUIRED_KEYS,
    SUPERUSER,
    connection_uri,
    credentials_secret,
    missing_keys,
)
from mydb_operator.model.spec import parse_spec
from mydb_operator.reconcile.prerequisites import ensure_credentials

SPEC = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi"})
USERS = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi", "credentials": {"secretName": "mine"}})


def test_the_secret_carries_both_users_and_the_uris_of_both_services() -> None:
    secret = credentials_secret("prod", "db")
    data = secret["stringData"]
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == ("db-credentials", "prod")
    assert secret["metadata"]["labels"] == {**names.selector_labels("db"), names.MANAGED_BY_LABEL: "mydb-operator"}
    assert (data["username"], data["replication-username"]) == (SUPERUSER, REPLICATION_USER)
    assert set(REQUIRED_KEYS) <= set(data)
    primary, replicas = urlsplit(data["uri"]), urlsplit(data["uri-ro"])
    assert (primary.hostname, replicas.hostname) == ("db.prod.svc", "db-ro.prod.svc")
    assert primary.password == replicas.password == data["password"] and primary.port == 5432


def test_every_secret_gets_new_passwords_and_the_two_users_differ() -> None:
    first, second = credentials_secret("ns", "db")["stringData"], credentials_secret("ns", "db")["stringData"]
    assert first["password"] != second["password"]
    assert first["password"] != first["replication-password"]
    assert len(first["password"]) >= 32 and len(first["replication-password"]) >= 32


def test_a_uri_quotes_what_a_uri_cannot_hold() -> None:
    assert connection_uri("a@b", "p/w:d?", "h") == "postgresql://a%40b:p%2Fw%3Ad%3F@h:5432/postgres"


def test_missing_keys_counts_data_and_string_data() -> None:
    encoded = base64.b64encode(b"x").decode()
    assert missing_keys({}) == list(REQUIRED_KEYS)
    assert missing_keys({"data": {"username": encoded}, "stringData": {"password": "x"}}) == [
        "replication-username", "replication-password"]


def test_the_first_install_creates_the_secret_once_and_a_retry_tells_nothing(api: FakeApi) -> None:
    """The operator asks for a create-only write each time (the API's 409 keeps the Secret: test_clients);
    a retried first install finds it made and has nothing to tell."""
    message, problem = run(ensure_credentials(api, "ns", "db", SPEC, first_install=True))
    assert problem is None and message == "created Secret db-credentials with random passwords"
    stored = api.secrets[("ns", "db-credentials")]
    password = stored["stringData"]["password"]

    # A first install retried (Helm failed after the Secret was made): the Secret is there, kept as it was.
    again, problem = run(ensure_credentials(api, "ns", "db", SPEC, first_install=True))
    assert (again, problem) == (None, None)
    assert api.secrets[("ns", "db-credentials")]["stringData"]["password"] == password


def test_after_the_first_install_a_missing_secret_is_not_made_again(api: FakeApi) -> None:
    assert run(ensure_credentials(api, "ns", "db", SPEC, first_install=False)) == (None, None)
    assert api.secrets == {}


def test_a_users_secret_is_read_and_judged_never_written(api: FakeApi) -> None:
    message, problem = run(ensure_credentials(api, "ns", "db", USERS, first_install=True))
    assert message is None and problem is not None and problem.reason == "CredentialsMissing"

    api.secrets[("ns", "mine")] = {"stringData": {"username": "u", "password": "p"}}
    _, problem = run(ensure_credentials(api, "ns", "db", USERS, first_install=True))
    assert problem is not None and problem.reason == "CredentialsInvalid"
    assert problem.message.endswith("lacks the keys replication-username, replication-password")

    api.secrets[("ns", "mine")]["stringData"].update({"replication-username": "r", "replication-password": "q"})
    assert run(ensure_credentials(api, "ns", "db", USERS, first_install=True)) == (None, None)
    assert list(api.secrets) == [("ns", "mine")]


def test_a_foreign_secret_with_the_credentials_name_is_reported_and_never_written(api: FakeApi) -> None:
    """Someone else's `db-credentials` (no operator label for this database): a first install stops with
    SecretNameTaken, and the Secret stays byte for byte as it was."""
    foreign = {"metadata": {"namespace": "ns", "name": "db-credentials", "labels": {"app": "web"}},
               "data": {"password": "c2VjcmV0"}}
    api.secrets[("ns", "db-credentials")] = copy.deepcopy(foreign)
    message, problem = run(ensure_credentials(api, "ns", "db", SPEC, first_install=True))
    assert message is None and problem is not None and problem.reason == "SecretNameTaken"
    assert "Secret db-credentials in namespace ns exists and is not this database's" in problem.message
    assert api.secrets[("ns", "db-credentials")] == foreign
    assert [w for w in api.writes if w[0] != "create_secret_once"] == []
