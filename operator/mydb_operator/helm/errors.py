"""Helm's failures, as one line fit for status and Events."""

from __future__ import annotations

from pyhelm3 import errors as helm_errors


class HelmError(Exception):
    """Helm refused; the message is Helm's own last line, fit for status and Events."""


def helm_message(error: helm_errors.Error) -> str:
    """Helm's own last line of a failed command, without its "Error: " prefix."""
    text = error.stderr.decode(errors="replace").strip() if isinstance(error.stderr, bytes) else str(error)
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else str(error)).removeprefix("Error: ")
