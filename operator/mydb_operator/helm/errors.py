"""Helm's failures, as one line fit for status and Events."""

from __future__ import annotations

from pyhelm3 import errors as helm_errors


class HelmError(Exception):
    """Helm refused; the message is Helm's own last line, fit for status and Events."""


def last_line(stderr: str) -> str | None:
    """Helm's own last line of what it printed, without its "Error: " prefix; None when it printed nothing. Pure."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("Error: ") if lines else None


def helm_message(error: helm_errors.Error) -> str:
    """Helm's own last line of a failed command run through pyhelm3."""
    text = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else str(error)
    return last_line(text) or str(error).removeprefix("Error: ")
