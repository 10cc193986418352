"""SCRAM-SHA-256 password verifiers as PostgreSQL stores them (RFC 5802, RFC 7677). Pure.

The operator sets a role's password as a verifier it computed (`ALTER ROLE ... PASSWORD 'SCRAM-SHA-256$...'`),
never as the password itself: a statement log, pg_stat_statements or an audit extension then sees nothing
a client could log in with. It checks a stored verifier against a Secret's password the same way, so a
password that did not change is not set again (a new salt each time would change the verifier for nothing)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import unicodedata

ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)
SALT_BYTES = 16
VERIFIER = re.compile(r"^SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$")
# RFC 4013 (SASLprep) maps these to a space, and these to nothing; PostgreSQL's pg_saslprep does the same.
_SPACES = {"\u00a0", "\u1680", "\u3000", "\u202f", "\u205f", *map(chr, range(0x2000, 0x200C))}
_NOTHING = {"\u00ad", "\u034f", "\u1806", "\u180b", "\u180c", "\u180d", "\u200b", "\u200c", "\u200d", "\u2060"}
_NOTHING |= {chr(c) for c in range(0xFE00, 0xFE10)} | {"\ufeff"}


def prepared(password: str) -> bytes:
    """The bytes PostgreSQL derives the keys from: the password after SASLprep's mapping and NFKC (pure ASCII is
    left as it is). PostgreSQL falls back to the raw bytes where SASLprep refuses (prohibited characters), as
    this does for control characters."""
    if password.isascii():
        return password.encode()
    mapped = "".join(" " if c in _SPACES else "" if c in _NOTHING else c for c in password)
    normal = unicodedata.normalize("NFKC", mapped)
    if any(unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn") for c in normal):
        return password.encode()
    return normal.encode()


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", prepared(password), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return hashlib.sha256(client_key).digest(), server_key


def verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """PASSWORD's verifier, with a new random salt unless one is given."""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    stored, server = _keys(password, salt, iterations)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server)}"


def verifies(stored: str | None, password: str) -> bool:
    """Whether STORED (pg_authid.rolpassword) is a SCRAM verifier of PASSWORD. An MD5 hash, a plain text or
    nothing is not: the password is then set again, as a verifier."""
    found = VERIFIER.match(stored or "")
    if found is None:
        return False
    iterations, salt, stored_key, server_key = found.groups()
    expected = _keys(password, base64.b64decode(salt), int(iterations))
    return hmac.compare_digest(expected[0], base64.b64decode(stored_key)) and hmac.compare_digest(
        expected[1], base64.b64decode(server_key)
    )
