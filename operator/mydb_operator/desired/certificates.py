"""Each database's own certificate authority and its servers' certificate, and the Secrets that hold them.

One CA per database (as CloudNativePG does): a client trusts exactly the
database it connects to, a database deleted takes its CA with it, and a leaked
key exposes one database. The server certificate names the read-write and
read-only Services and every pod through the headless Service (a wildcard:
scaling issues nothing). ECDSA P-256 keys: fast to make, and every libpq and
OpenSSL the chart's images carry accepts them."""

from __future__ import annotations

import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .. import names

CA_DAYS = 3650
SERVER_DAYS = 90
CLUSTER_DOMAIN = "cluster.local"
# Issued this long before now: a node whose clock runs a little behind still takes the certificate as valid.
BACKDATE = datetime.timedelta(minutes=5)
TLS_SECRET_TYPE = "kubernetes.io/tls"


def server_names(namespace: str, release: str) -> list[str]:
    """Every name a client may reach a server by: the two Services and the pods, in each DNS form."""
    hosts: list[str] = []
    for service in (names.read_write_service(release), names.read_only_service(release)):
        hosts += [service, f"{service}.{namespace}", names.service_host(namespace, service)]
        hosts.append(f"{names.service_host(namespace, service)}.{CLUSTER_DOMAIN}")
    pods = names.service_host(namespace, names.headless_service(release))
    return [*hosts, f"*.{pods}", f"*.{pods}.{CLUSTER_DOMAIN}"]


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organization: str = "") -> x509.Name:
    """X.509 caps each attribute at 64 characters: a release name (45 at most) plus a word, and a namespace
    (63 at most) as the organization, each fit."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(namespace: str, release: str, now: datetime.datetime) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: a self-signed CA for this database's servers only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"{release} CA", namespace)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def new_server_certificate(
    ca_pem: bytes, ca_key_pem: bytes, hosts: list[str], now: datetime.datetime, days: int = SERVER_DAYS
) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: a server certificate for HOSTS, signed by the CA."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + datetime.timedelta(days=days), ca.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _metadata(namespace: str, release: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {**names.selector_labels(release), names.MANAGED_BY_LABEL: names.OPERATOR_NAME},
    }


def ca_secret(namespace: str, release: str, certificate: bytes, key: bytes) -> dict[str, Any]:
    """The CA and its key: only the operator reads it (no pod mounts it)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(namespace, release, names.ca_secret_name(release)),
        "type": "Opaque",
        "stringData": {"ca.crt": certificate.decode(), "ca.key": key.decode()},
    }


def server_secret(namespace: str, release: str, certificate: bytes, key: bytes, ca: bytes) -> dict[str, Any]:
    """The servers' certificate and key, and the CA clients verify them with: cert-manager's layout, so a
    Certificate's Secret can take its place (spec.tls.secretName)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(namespace, release, names.server_tls_secret_name(release)),
        "type": TLS_SECRET_TYPE,
        "stringData": {"tls.crt": certificate.decode(), "tls.key": key.decode(), "ca.crt": ca.decode()},
    }
