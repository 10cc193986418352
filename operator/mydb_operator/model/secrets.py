"""A Secret's data as the API serves it (base64), decoded. Pure."""

from __future__ import annotations

import base64
import binascii
from typing import Any


def secret_files(secret: dict[str, Any] | None) -> dict[str, bytes]:
    """A Secret's data, decoded; keys whose value is not base64 are left out."""
    files: dict[str, bytes] = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        try:
            files[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
    return files
