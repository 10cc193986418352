"""The database's certificates: the operator's CA and server certificate made, and made again before they
expire (or when asked), or the user's checked; and the servers reloaded once a new one reached their files.

Secrets are not watched (the operator keeps no Secret it does not need), so
status carries when to look again (`status.tls.renewAt`); a pass looks at the
Secrets then, before a Helm run (the pods mount the server Secret), when the
rotate annotation asks, and when status knows nothing of them yet."""

from __future__ import annotations

import datetime
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..cluster.api import ApiPort
from ..desired.certificates import ca_secret, new_ca, new_server_certificate, server_names, server_secret
from ..desired.values import tls_secret_name
from ..instances import commands
from ..model.certificates import CertificateFacts, certificate_facts, name_matches, signed_by
from ..model.instances import InstanceFacts, Probe
from ..model.secrets import name_taken_message, secret_files, taken
from ..model.spec import DatabaseSpec
from ..model.timestamps import rfc3339
from ..policy.certificates import RENEW_BEFORE, Issued, ca_renewal, server_renewal, user_certificate_problem
from ..status.problem import Problem
from ..status.warnings import Event
from .prerequisites import refresh_credentials
from .runtime import Runtime
from .servers import Servers

log = logging.getLogger(__name__)
USER_KEYS = ("tls.crt", "tls.key", "ca.crt")
# While a new certificate has not reached every server's files yet (the kubelet rewrites a Secret's volume
# within about a minute), the next pass comes this soon.
RELOAD_RECHECK_SECONDS = 10.0


@dataclass
class CertificateState:
    """What one look at the certificates found and did: status.tls, the Events, a problem that stops Helm."""

    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    problem: Problem | None = None
    recheck: float | None = None
    ca: bytes = b""  # the CA clients verify the servers with, when the certificates were looked at


def fingerprint(pem: bytes) -> str:
    """What a server's probe says of the certificate file it has mounted (instances/probe.py)."""
    return hashlib.sha256(pem).hexdigest()


def required_hosts(namespace: str, release: str) -> list[str]:
    """The names the chart's own clients verify: the Services by their short names (backups, the archive,
    helm test) and a pod through the headless Service (a replica's primary)."""
    pod = names.pod_host(namespace, release, names.pod_name(release, 0))
    return [names.read_write_service(release), names.read_only_service(release), pod]


def _described(secret: str, issuer: str, server: CertificateFacts, pem: bytes) -> dict[str, Any]:
    return {
        "secretName": secret,
        "issuer": issuer,
        "notAfter": rfc3339(server.not_after),
        "fingerprint": fingerprint(pem),
    }


async def issue(api: ApiPort, namespace: str, name: str, now: datetime.datetime, rotate: bool) -> CertificateState:
    """The operator's CA and server certificate, made when missing, renewed when due; ROTATE: a new server
    certificate now."""
    state = CertificateState()
    ca_name, secret = names.ca_secret_name(name), names.server_tls_secret_name(name)
    found = {ca_name: await api.read_secret(namespace, ca_name), secret: await api.read_secret(namespace, secret)}
    foreign = taken(found, name)
    if foreign:
        return CertificateState(problem=Problem("SecretNameTaken", name_taken_message(namespace, foreign)))
    ca_files = secret_files(found[ca_name])
    ca_pem, ca_key = ca_files.get("ca.crt", b""), ca_files.get("ca.key", b"")
    ca = certificate_facts(ca_pem) if ca_key else None
    why_ca = ca_renewal(ca, now)
    if why_ca is not None:
        ca_pem, ca_key = new_ca(namespace, name, now)
        ca = certificate_facts(ca_pem)
        await api.write_secret(ca_secret(namespace, name, ca_pem, ca_key), replacing=found[ca_name])
        if why_ca != "no CA yet":
            state.events.append(("Normal", "CARenewed", f"a new CA for the database: {why_ca}"))
    assert ca is not None
    files = secret_files(found[secret])
    pem = files.get("tls.crt", b"")
    server = certificate_facts(pem) if files.get("tls.key") and files.get("ca.crt") == ca_pem else None
    hosts = server_names(namespace, name)
    why = server_renewal(Issued(ca, server, signed_by(pem, ca_pem)), hosts, now)
    if why is None and rotate:
        why = f"asked for by the annotation {names.ROTATE_CERTIFICATE_ANNOTATION}"
    if why is not None:
        pem, key = new_server_certificate(ca_pem, ca_key, hosts, now)
        server = certificate_facts(pem)
        await api.write_secret(server_secret(namespace, name, pem, key, ca_pem), replacing=found[secret])
        if why != "no server certificate yet":
            state.events.append(("Normal", "CertificateRenewed", f"a new server certificate in {secret}: {why}"))
    assert server is not None
    state.status = _described(secret, "operator", server, pem)
    state.ca = ca_pem
    state.status["caNotAfter"] = rfc3339(ca.not_after)
    state.status["renewAt"] = rfc3339(min(server.not_after, ca.not_after) - RENEW_BEFORE)
    return state


async def check_users(
    api: ApiPort, namespace: str, name: str, spec: DatabaseSpec, now: datetime.datetime
) -> CertificateState:
    """The user's Secret (spec.tls.secretName): there, complete, signed by its CA, naming what clients use."""
    secret = tls_secret_name(name, spec)
    where = f"spec.tls.secretName: Secret {secret}"

    def invalid(why: str) -> CertificateState:
        return CertificateState(problem=Problem("TLSSecretInvalid", f"{where} {why}"))

    found = await api.read_secret(namespace, secret)
    if found is None:
        return CertificateState(problem=Problem("TLSSecretMissing", f"{where} does not exist in namespace {namespace}"))
    files = secret_files(found)
    missing = [key for key in USER_KEYS if not files.get(key)]
    if missing:
        return invalid(f"lacks the keys {', '.join(missing)}")
    pem = files["tls.crt"]
    server = certificate_facts(pem)
    if server is None:
        return invalid("holds no PEM certificate in tls.crt")
    if not signed_by(pem, files["ca.crt"]):
        return invalid("holds a tls.crt that its ca.crt did not sign: replicas could not verify it")
    uncovered = [h for h in required_hosts(namespace, name) if not any(name_matches(n, h) for n in server.dns_names)]
    if uncovered:
        return invalid(f"holds a certificate that does not name {', '.join(uncovered)}, which clients and replicas use")
    state = CertificateState(status=_described(secret, "user", server, pem), ca=files["ca.crt"])
    # Looked at again within a day: the user renews it, and nothing tells the operator.
    state.status["renewAt"] = rfc3339(min(server.not_after, now + datetime.timedelta(days=1)))
    trouble = user_certificate_problem(server, now)
    if trouble is not None:
        state.status["warning"] = trouble[1]
        state.events.append(("Warning", *trouble))
    return state


def looked_at_now(name: str, spec: DatabaseSpec, known: dict[str, Any], rotate: bool, now: datetime.datetime) -> bool:
    """Whether this pass reads the certificate Secrets: a rotation is asked for, status knows nothing of them
    (or of another Secret), or a renewal is due. KNOWN: the last status.tls."""
    return (
        rotate
        or not known.get("renewAt")
        or known.get("secretName") != tls_secret_name(name, spec)
        or str(known["renewAt"]) <= rfc3339(now)
    )


async def keep_certificates(
    namespace: str,
    name: str,
    spec: DatabaseSpec,
    annotations: dict[str, str],
    previous: dict[str, Any],
    runtime: Runtime,
    now: datetime.datetime,
    before_helm: bool = False,
) -> CertificateState:
    """This pass's look at the certificates (BEFORE_HELM: Helm is about to run, so they must be there); the
    last status's when it need not look."""
    known = dict(previous.get("tls") or {})
    if not spec.tls:
        if known and not spec.existing_secret:  # TLS just turned off: the Secret's URIs go back to plain
            await refresh_credentials(runtime.api, namespace, name, b"")
        return CertificateState()
    rotate = names.ROTATE_CERTIFICATE_ANNOTATION in annotations
    if not (before_helm or looked_at_now(name, spec, known, rotate, now)):
        return CertificateState(status=known)
    if spec.tls_secret:
        state = await check_users(runtime.api, namespace, name, spec, now)
        # One Warning per new trouble, not one per look.
        state.events = [e for e in state.events if e[2] != known.get("warning")]
    else:
        state = await issue(runtime.api, namespace, name, now, rotate and not spec.tls_secret)
    await _keep_credentials(namespace, name, spec, state, known, runtime, before_helm)
    if rotate:
        value = annotations[names.ROTATE_CERTIFICATE_ANNOTATION]
        await runtime.api.remove_annotation(namespace, name, names.ROTATE_CERTIFICATE_ANNOTATION, value)
    if state.status.get("fingerprint") != known.get("fingerprint"):
        # A new certificate is reaching the servers' files: watch for it to land.
        state.recheck = RELOAD_RECHECK_SECONDS
    return state


async def _keep_credentials(
    namespace: str,
    name: str,
    spec: DatabaseSpec,
    state: CertificateState,
    known: dict[str, Any],
    runtime: Runtime,
    first_install: bool,
) -> None:
    """The operator's credentials Secret carries the CA looked at (status.tls.credentialsCA says which), written
    again when it changed. Not on a first install, which makes the Secret with it."""
    if not state.ca or spec.existing_secret or first_install:
        return
    written = fingerprint(state.ca)
    current = written == known.get("credentialsCA")
    if current or await refresh_credentials(runtime.api, namespace, name, state.ca):
        state.status["credentialsCA"] = written


async def reload_where_due(
    namespace: str,
    name: str,
    spec: DatabaseSpec,
    state: CertificateState,
    probes: dict[str, Probe],
    pods: list[Any],
    runtime: Runtime,
) -> None:
    """Each server whose certificate file changed since it read its configuration is reloaded (it then
    presents the new certificate to new connections; sessions keep theirs). Servers whose file is not the
    current certificate yet make the next pass come soon."""
    current = state.status.get("fingerprint")
    if not current:
        return
    servers = Servers(namespace, name, spec, runtime)
    for probe in probes.values():
        if not isinstance(probe, InstanceFacts) or probe.certificate is None:
            continue
        if probe.reload_due:
            if await servers.command(pods, probe.pod, "reload the certificate", commands.reload):
                log.info("%s/%s: %s reloaded: its certificate file changed", namespace, name, probe.pod)
            state.recheck = RELOAD_RECHECK_SECONDS
        elif probe.certificate != current:
            state.recheck = RELOAD_RECHECK_SECONDS
