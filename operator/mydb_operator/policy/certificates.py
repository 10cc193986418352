"""When the operator issues a database's certificates again, and when a user's certificate deserves a
Warning. Pure: the facts of what is in the Secrets, and the time.

Renewal is a third of the lifetime early (30 of 90 days, as cert-manager
does by default): a renewal that fails (the API unreachable) has weeks of
retries before a client notices."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from ..model.certificates import CertificateFacts, name_matches

RENEW_BEFORE = datetime.timedelta(days=30)
# A user's certificate: the Warning comes this long before it expires (cert-manager renews 30 days ahead,
# so one still this close to its end is not being renewed).
WARN_BEFORE = datetime.timedelta(days=14)


@dataclass(frozen=True)
class Issued:
    """What the operator holds: its CA and the server certificate, as read from their Secrets (None: missing
    or unreadable); signed: whether the server certificate carries this CA's signature."""

    ca: CertificateFacts | None
    server: CertificateFacts | None
    signed: bool


def ca_renewal(ca: CertificateFacts | None, now: datetime.datetime) -> str | None:
    """Why the CA must be made again (None: it holds)."""
    if ca is None:
        return "no CA yet"
    if not ca.is_ca:
        return "the CA Secret holds no CA certificate"
    if ca.not_after - now < RENEW_BEFORE:
        return f"the CA expires at {ca.not_after:%Y-%m-%dT%H:%M:%SZ}"
    return None


def server_renewal(issued: Issued, hosts: list[str], now: datetime.datetime) -> str | None:
    """Why the server certificate must be issued again (None: it holds)."""
    server = issued.server
    if server is None:
        return "no server certificate yet"
    if not issued.signed:
        return "the server certificate is not signed by the database's CA"
    uncovered = [h for h in hosts if not any(name_matches(n, h) or n == h for n in server.dns_names)]
    if uncovered:
        return f"the server certificate does not name {', '.join(uncovered)}"
    if server.not_after - now < RENEW_BEFORE:
        return f"the server certificate expires at {server.not_after:%Y-%m-%dT%H:%M:%SZ}"
    return None


def user_certificate_problem(server: CertificateFacts | None, now: datetime.datetime) -> tuple[str, str] | None:
    """(reason, message) when a user's server certificate is expired or close to it; None when it holds."""
    if server is None:
        return None
    when = f"{server.not_after:%Y-%m-%dT%H:%M:%SZ}"
    if server.not_after <= now:
        return "CertificateExpired", f"the server certificate expired at {when}: clients that verify it are refused"
    if server.not_after - now < WARN_BEFORE:
        # No count of days: the words stay the same until they must change, so one Warning tells it.
        return "CertificateExpiring", f"the server certificate expires at {when} and is not renewed yet"
    return None
