"""The certificates the operator makes, what it reads of them, when it makes them again, and the look a pass
takes at them (on the in-memory API)."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import ssl
from pathlib import Path

import pytest
from fake_api import FakeApi, make_runtime
from test_reconcile_orchestrator import FakeHelm

from mydb_operator import names
from mydb_operator.desired.credentials import credentials_secret, credentials_update
from mydb_operator.desired.certificates import (
    CA_DAYS,
    SERVER_DAYS,
    new_ca,
    new_server_certificate,
    server_names,
    server_secret,
)
from mydb_operator.model.certificates import certificate_facts, name_matches, signed_by
from mydb_operator.model.spec import parse_spec
from mydb_operator.policy.certificates import (
    RENEW_BEFORE,
    Issued,
    ca_renewal,
    server_renewal,
    user_certificate_problem,
)
from mydb_operator.reconcile.certificates import fingerprint, keep_certificates, required_hosts

NOW = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)
SPEC = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi"})


def test_the_server_names_cover_both_services_in_every_form_and_every_pod():
    hosts = server_names("team", "db")
    for host in ("db", "db.team", "db.team.svc", "db.team.svc.cluster.local", "db-ro", "db-ro.team.svc"):
        assert host in hosts
    assert "*.db-headless.team.svc" in hosts
    pod = names.pod_host("team", "db", "db-7")
    assert any(name_matches(n, pod) for n in hosts)
    assert required_hosts("team", "db") == ["db", "db-ro", "db-0.db-headless.team.svc"]


@pytest.mark.parametrize(("pattern", "host", "matches"), [
    ("*.db-headless.ns.svc", "db-0.db-headless.ns.svc", True),
    ("*.db-headless.ns.svc", "a.b.db-headless.ns.svc", False),  # one label, as libpq
    ("*.db-headless.ns.svc", "db-headless.ns.svc", False),
    ("DB.ns.svc", "db.ns.svc", True),
    ("db.ns.svc", "db.ns", False),
])
def test_names_match_as_libpq_compares_them(pattern, host, matches):
    assert name_matches(pattern, host) is matches


def test_a_new_ca_signs_a_server_certificate_that_python_verifies_by_name():
    ca, ca_key = new_ca("ns", "db", NOW)
    pem, key = new_server_certificate(ca, ca_key, server_names("ns", "db"), NOW)
    facts, ca_facts = certificate_facts(pem), certificate_facts(ca)
    assert facts is not None and ca_facts is not None
    assert ca_facts.is_ca and not facts.is_ca and facts.issuer == ca_facts.subject
    assert facts.not_after - NOW == datetime.timedelta(days=SERVER_DAYS)
    assert ca_facts.not_after - NOW == datetime.timedelta(days=CA_DAYS)
    assert signed_by(pem, ca) and not signed_by(pem, new_ca("ns", "db", NOW)[0])
    assert b"PRIVATE KEY" in key and certificate_facts(b"not a certificate") is None


def handshake(ca: bytes, pem: bytes, key: bytes, host: str, folder: Path) -> None:
    """A TLS handshake in memory between a server holding PEM and KEY and a client that trusts CA alone and checks
    HOST against the certificate: what a verify-full client does (Python's ssl is OpenSSL, as libpq's is)."""
    (folder / "tls.crt").write_bytes(pem)
    (folder / "tls.key").write_bytes(key)
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cadata=ca.decode()).wrap_bio(to_client, to_server, server_hostname=host)
    server = serving.wrap_bio(to_server, to_client, server_side=True)
    for _ in range(10):
        done = 0
        for side in (client, server):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        if done == 2:
            return
    raise AssertionError("the handshake did not finish")


def test_a_verify_full_client_trusts_the_server_certificate_by_every_name_and_no_other(tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)  # the handshake checks validity against the real clock
    ca, ca_key = new_ca("ns", "db", now)
    pem, key = new_server_certificate(ca, ca_key, server_names("ns", "db"), now)
    for host in ("db.ns.svc", "db-ro.ns.svc.cluster.local", "db-1.db-headless.ns.svc"):
        handshake(ca, pem, key, host, tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(ca, pem, key, "other.ns.svc", tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(new_ca("ns", "db", now)[0], pem, key, "db.ns.svc", tmp_path)  # another database's CA


def test_a_server_certificate_never_outlives_its_ca():
    ca, ca_key = new_ca("ns", "db", NOW - datetime.timedelta(days=CA_DAYS - 10))
    pem, _ = new_server_certificate(ca, ca_key, ["db"], NOW)
    facts = certificate_facts(pem)
    assert facts is not None and facts.not_after == certificate_facts(ca).not_after  # type: ignore[union-attr]


def test_renewal_comes_a_third_of_the_lifetime_early_and_for_a_wrong_ca_or_missing_names():
    ca, ca_key = new_ca("ns", "db", NOW)
    pem, _ = new_server_certificate(ca, ca_key, server_names("ns", "db"), NOW)
    ca_facts, facts = certificate_facts(ca), certificate_facts(pem)
    hosts = server_names("ns", "db")
    assert ca_renewal(ca_facts, NOW) is None and ca_renewal(None, NOW) == "no CA yet"
    assert server_renewal(Issued(ca_facts, facts, True), hosts, NOW) is None
    late = NOW + datetime.timedelta(days=SERVER_DAYS) - RENEW_BEFORE + datetime.timedelta(seconds=1)
    assert "expires at" in (server_renewal(Issued(ca_facts, facts, True), hosts, late) or "")
    assert server_renewal(Issued(ca_facts, None, False), hosts, NOW) == "no server certificate yet"
    assert "not signed" in (server_renewal(Issued(ca_facts, facts, False), hosts, NOW) or "")
    renamed = server_names("ns", "other")
    assert "does not name other" in (server_renewal(Issued(ca_facts, facts, True), renamed, NOW) or "")


def test_a_users_certificate_gets_a_warning_two_weeks_before_it_expires_and_after():
    ca, ca_key = new_ca("ns", "db", NOW)
    pem, _ = new_server_certificate(ca, ca_key, ["db"], NOW, days=20)
    facts = certificate_facts(pem)
    assert user_certificate_problem(facts, NOW) is None
    soon = user_certificate_problem(facts, NOW + datetime.timedelta(days=7))
    assert soon is not None and soon[0] == "CertificateExpiring" and "expires at 2026-12-24T12:00:00Z" in soon[1]
    gone = user_certificate_problem(facts, NOW + datetime.timedelta(days=21))
    assert gone is not None and gone[0] == "CertificateExpired"


def keep(api: FakeApi, spec=SPEC, annotations=None, previous=None, now=NOW, before_helm=False):
    runtime = make_runtime(FakeHelm(), api=api)
    return asyncio.run(keep_certificates("ns", "db", spec, annotations or {}, previous or {}, runtime, now,
                                         before_helm=before_helm))


def files(api: FakeApi, secret: str) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in api.secrets[("ns", secret)]["data"].items()}


def test_the_first_look_makes_the_ca_and_the_certificate_and_later_looks_read_nothing():
    api = FakeApi()
    first = keep(api, before_helm=True)
    assert first.problem is None and first.events == []
    tls = files(api, "db-tls")
    assert api.secrets[("ns", "db-tls")]["type"] == "kubernetes.io/tls"
    assert tls["ca.crt"] == files(api, "db-ca")["ca.crt"] and signed_by(tls["tls.crt"], tls["ca.crt"])
    status = first.status
    assert status["issuer"] == "operator" and status["fingerprint"] == fingerprint(tls["tls.crt"])
    assert status["renewAt"] == "2027-02-02T12:00:00Z"  # 90 days, less 30
    api.reads.clear()
    api.writes.clear()
    idle = keep(api, previous={"tls": status}, now=NOW + datetime.timedelta(days=1))
    assert idle.status == status and api.reads == api.writes == [] and idle.recheck is None
    due = keep(api, previous={"tls": status}, now=NOW + datetime.timedelta(days=61))
    assert [e[1] for e in due.events] == ["CertificateRenewed"] and due.status["fingerprint"] != status["fingerprint"]
    assert due.recheck is not None  # the servers get it within a minute: the next passes watch for it
    assert files(api, "db-tls")["ca.crt"] == tls["ca.crt"]  # the same CA: clients keep trusting


@pytest.mark.parametrize("secret", ["db-ca", "db-tls"])
def test_a_foreign_secret_with_a_certificate_name_is_reported_and_never_written(secret):
    """A Secret named as the database's CA or server certificate that the operator did not make for it (another
    app's `web-tls`, or one of the operator's for another database): SecretNameTaken stops the pass before Helm,
    and nothing is written, that Secret least of all."""
    api = FakeApi()
    for labels in ({"app": "web"}, {names.MANAGED_BY_LABEL: names.OPERATOR_NAME, names.INSTANCE_LABEL: "other"}):
        foreign = {"metadata": {"namespace": "ns", "name": secret, "labels": labels}, "data": {"tls.crt": "eA=="}}
        api.secrets = {("ns", secret): copy.deepcopy(foreign)}
        api.writes.clear()
        state = keep(api, before_helm=True)
        assert state.problem is not None and state.problem.reason == "SecretNameTaken"
        assert state.problem.message.startswith(f"Secret {secret} in namespace ns exists and is not this database's")
        assert api.writes == [] and api.secrets == {("ns", secret): foreign}


def test_the_rotate_annotation_issues_a_new_certificate_and_is_removed():
    api = FakeApi()
    status = keep(api, before_helm=True).status
    rotated = keep(api, annotations={names.ROTATE_CERTIFICATE_ANNOTATION: "now"}, previous={"tls": status})
    assert rotated.status["fingerprint"] != status["fingerprint"]
    assert "asked for by the annotation" in rotated.events[0][2]
    assert ("remove_annotation", "ns", "db", names.ROTATE_CERTIFICATE_ANNOTATION, "now") in api.writes


def test_tls_off_makes_nothing():
    api = FakeApi()
    state = keep(api, spec=parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "tls": {"enabled": False}}),
                 before_helm=True)
    assert state.status == {} and api.secrets == {}


def users_spec():
    return parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "tls": {"secretName": "mine"}})


def test_a_users_secret_is_checked_and_never_written():
    api = FakeApi()
    missing = keep(api, spec=users_spec(), before_helm=True)
    assert missing.problem is not None and missing.problem.reason == "TLSSecretMissing"
    ca, ca_key = new_ca("ns", "platform", NOW)
    narrow, _ = new_server_certificate(ca, ca_key, ["db.ns.svc"], NOW)
    pem, key = new_server_certificate(ca, ca_key, server_names("ns", "db"), NOW, days=10)
    for body, why in (
        ({"tls.crt": pem.decode(), "tls.key": key.decode()}, "lacks the keys ca.crt"),
        ({"tls.crt": pem.decode(), "tls.key": key.decode(), "ca.crt": new_ca("ns", "x", NOW)[0].decode()},
         "its ca.crt did not sign"),
        ({"tls.crt": narrow.decode(), "tls.key": key.decode(), "ca.crt": ca.decode()}, "does not name db, db-ro"),
    ):
        asyncio.run(api.write_secret({"metadata": {"namespace": "ns", "name": "mine"}, "stringData": body},
                                     api.secrets.get(("ns", "mine"))))
        state = keep(api, spec=users_spec(), before_helm=True)
        assert state.problem is not None and state.problem.reason == "TLSSecretInvalid", why
        assert why in state.problem.message
    asyncio.run(api.write_secret(server_secret("ns", "db", pem, key, ca) | {"metadata": {"namespace": "ns",
                                                                                         "name": "mine"}},
                                 api.secrets.get(("ns", "mine"))))
    api.writes.clear()
    state = keep(api, spec=users_spec(), before_helm=True)
    assert state.problem is None and state.status["issuer"] == "user" and state.status["secretName"] == "mine"
    assert [e[1] for e in state.events] == ["CertificateExpiring"]
    assert api.writes == []
    again = keep(api, spec=users_spec(), previous={"tls": state.status}, now=NOW + datetime.timedelta(days=2))
    assert again.events == []  # the same trouble: no second Warning


def test_the_longest_names_kubernetes_allows_fit_a_certificate():
    namespace, release = "n" * 63, "r" * 45  # a namespace's limit, and the CRD's for a MyDatabase
    ca, ca_key = new_ca(namespace, release, NOW)
    pem, _ = new_server_certificate(ca, ca_key, server_names(namespace, release), NOW)
    assert signed_by(pem, ca)


def plain_credentials(api: FakeApi, owner: str = names.OPERATOR_NAME) -> None:
    """The credentials Secret a chart before 0.10.0 made: plain URIs, no CA."""
    body = credentials_secret("ns", "db")
    api.secrets[("ns", "db-credentials")] = {
        "metadata": {**body["metadata"], "labels": {**body["metadata"]["labels"], names.MANAGED_BY_LABEL: owner}},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in body["stringData"].items()},
    }


def test_the_credentials_follow_the_ca_and_keep_their_uris_unless_tls_is_off():
    plain = {k: v.encode() for k, v in credentials_secret("ns", "db")["stringData"].items()}
    assert credentials_update(plain, b"CA PEM") == {"ca.crt": "CA PEM"}  # an old client keeps its URI
    assert credentials_update({**plain, "ca.crt": b"CA PEM"}, b"CA PEM") == {}
    assert credentials_update({**plain, "ca.crt": b"OLD CA"}, b"CA PEM") == {"ca.crt": "CA PEM"}
    verifying = {k: v.encode() for k, v in credentials_secret("ns", "db", ca=b"CA PEM")["stringData"].items()}
    assert verifying["uri"].endswith(b"?sslmode=verify-full")
    off = credentials_update(verifying, b"")  # a URI that verifies could not reach a plain server
    stripped = {key: verifying[key].decode().removesuffix("?sslmode=verify-full") for key in ("uri", "uri-ro")}
    assert off == {"ca.crt": None, **stripped} and "sslmode" not in str(stripped)
    assert credentials_update(plain, b"") == {}


def test_an_upgraded_databases_credentials_get_the_ca_once_and_a_new_ca_again():
    api = FakeApi()
    plain_credentials(api)
    password = files(api, "db-credentials")["password"]
    uris = {key: files(api, "db-credentials")[key] for key in ("uri", "uri-ro")}
    moved = keep(api)  # status.tls empty: the first look after the operator's upgrade to TLS
    held = files(api, "db-credentials")
    assert held["ca.crt"] == files(api, "db-ca")["ca.crt"] and held["password"] == password
    assert {key: held[key] for key in uris} == uris  # a client reading them works as before (TLS, unverified)
    assert moved.status["credentialsCA"] == fingerprint(held["ca.crt"])
    api.writes.clear()
    renewed = keep(api, previous={"tls": moved.status}, now=NOW + datetime.timedelta(days=61))
    assert [w[0] for w in api.writes] == ["write_secret"]  # a new server certificate; the CA, and so the Secret, kept
    assert renewed.status["credentialsCA"] == moved.status["credentialsCA"]
    api.secrets.pop(("ns", "db-ca"))  # a new CA (as when it nears its end), seen at the next look
    again = keep(api, annotations={names.ROTATE_CERTIFICATE_ANNOTATION: "now"}, previous={"tls": renewed.status})
    assert files(api, "db-credentials")["ca.crt"] == files(api, "db-ca")["ca.crt"] != held["ca.crt"]
    assert again.status["credentialsCA"] != moved.status["credentialsCA"]


def test_a_first_install_reads_no_credentials_and_a_users_secret_is_never_written():
    api = FakeApi()
    first = keep(api, before_helm=True)
    assert ("read_secret", "ns", "db-credentials") not in api.reads and "credentialsCA" not in first.status
    plain_credentials(api, owner="someone-else")
    api.writes.clear()
    later = keep(api, previous={"tls": {}})
    assert [w for w in api.writes if w[0] == "update_secret_data"] == [] and "credentialsCA" not in later.status


def test_tls_turned_off_puts_plain_uris_back_once():
    api = FakeApi()
    body = credentials_secret("ns", "db", ca=b"CA PEM")  # made with TLS: its URIs verify the server
    api.secrets[("ns", "db-credentials")] = {
        "metadata": body["metadata"],
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in body["stringData"].items()},
    }
    status = keep(api).status
    off = parse_spec({"replicas": 1, "version": "15.2", "storage": "1Gi", "tls": {"enabled": False}})
    assert keep(api, spec=off, previous={"tls": status}).status == {}
    held = files(api, "db-credentials")
    assert "ca.crt" not in held and b"sslmode" not in held["uri"] and b"sslmode" not in held["uri-ro"]
    api.writes.clear()
    keep(api, spec=off, previous={"tls": {}})
    assert api.writes == []
