"""The superuser's login for each database, read from its credentials Secret once and kept in memory.

Never logged, never in status or Events; read again when a server refuses it
(the Secret was changed)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .connection import Login

Key = tuple[str, str]  # (namespace, Secret name)


def login_from(secret: dict[str, Any]) -> Login | None:
    """The Secret's username and password, or None when it lacks them."""
    data = secret.get("data") or {}
    try:
        user = base64.b64decode(data.get("username", "")).decode()
        password = base64.b64decode(data.get("password", "")).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return Login(user, password) if user and password else None


class Logins:
    def __init__(self) -> None:
        self._known: dict[Key, Login] = {}

    def get(self, key: Key) -> Login | None:
        return self._known.get(key)

    def remember(self, key: Key, login: Login) -> None:
        self._known[key] = login

    def forget(self, key: Key) -> None:
        self._known.pop(key, None)
