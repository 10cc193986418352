"""What a certificate says: its names, its issuer, its validity. Pure: PEM in, facts out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class CertificateFacts:
    subject: str  # the common name
    issuer: str  # the issuer's common name
    serial: int
    not_before: datetime
    not_after: datetime
    dns_names: tuple[str, ...]
    is_ca: bool


def _common_name(name: x509.Name) -> str:
    found = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = found[0].value if found else ""
    return value.decode() if isinstance(value, bytes) else value


def certificate_facts(pem: bytes) -> CertificateFacts | None:
    """The first certificate of PEM (a server certificate before its chain), or None when there is none."""
    try:
        certificate = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = tuple(names.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        dns_names = ()
    try:
        is_ca = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    return CertificateFacts(
        subject=_common_name(certificate.subject),
        issuer=_common_name(certificate.issuer),
        serial=certificate.serial_number,
        not_before=certificate.not_valid_before_utc,
        not_after=certificate.not_valid_after_utc,
        dns_names=dns_names,
        is_ca=is_ca,
    )


def signed_by(pem: bytes, ca_pem: bytes) -> bool:
    """Whether the certificate in PEM carries a valid signature of the CA in CA_PEM."""
    try:
        certificate = x509.load_pem_x509_certificate(pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def name_matches(pattern: str, host: str) -> bool:
    """A certificate name against a host, as libpq's verify-full compares them: a leading `*.` stands for
    exactly one label."""
    pattern, host = pattern.lower(), host.lower()
    if pattern.startswith("*."):
        first, dot, rest = host.partition(".")
        return bool(first) and bool(dot) and rest == pattern[2:]
    return pattern == host
