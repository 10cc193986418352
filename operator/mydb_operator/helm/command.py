"""pyhelm3's Command, plus the flags it lacks: the post-renderer, and no client-side OpenAPI check."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyhelm3
from pyhelm3 import errors as helm_errors

from .errors import HelmError

# The API server validates every object anyway (server-side apply refuses fields
# not in its schema), so Helm's client-side check only costs a download and a
# parse of the OpenAPI document: half of Helm's CPU per upgrade. pyhelm3's own
# disable_validation option is broken (0.5.8 extends the command by characters).
SKIP_CLIENT_VALIDATION = "--disable-openapi-validation"


class OperatorCommand(pyhelm3.Command):
    """pyhelm3's Command, plus the flags it lacks: Helm's --post-renderer on the commands
    that render, and no client-side OpenAPI validation on upgrade."""

    def __init__(self, *, post_renderer: tuple[str, str] | None, **kwargs: Any):
        super().__init__(**kwargs)
        self._post_renderer = post_renderer

    async def run(self, command: list[str], input: bytes | None = None) -> bytes:  # noqa: A002 (pyhelm3's name)
        verb = command[0] if command else ""
        if verb == "upgrade":
            command = [*command, SKIP_CLIENT_VALIDATION]
        if not (self._post_renderer and verb in ("upgrade", "template")):
            output: bytes = await super().run(command, input)
            return output
        name, config = self._post_renderer
        with tempfile.TemporaryDirectory(prefix="mydb-postrender-") as scratch:
            reason = Path(scratch) / "error"
            try:
                rendered: bytes = await super().run(
                    [
                        *command,
                        "--post-renderer",
                        name,
                        "--post-renderer-args",
                        config,
                        "--post-renderer-args",
                        str(reason),
                    ],
                    input,
                )
                return rendered
            except helm_errors.Error:
                # Helm reports only "plugin exited with error"; the plugin left the reason here.
                if reason.exists():
                    raise HelmError(f"platform objectPatches: {reason.read_text()}") from None
                raise
