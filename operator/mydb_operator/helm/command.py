"""pyhelm3's Command, plus what it lacks: an explicit environment for Helm, the post-renderer, and no
client-side OpenAPI check."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyhelm3
import yaml
from pyhelm3 import errors as helm_errors
from pyhelm3.command import CHART_NOT_FOUND, CONNECTION_ERROR

from .errors import HelmError

# The API server validates every object anyway (server-side apply refuses fields
# not in its schema), so Helm's client-side check only costs a download and a
# parse of the OpenAPI document: half of Helm's CPU per upgrade. pyhelm3's own
# disable_validation option is broken (0.5.8 extends the command by characters).
SKIP_CLIENT_VALIDATION = "--disable-openapi-validation"
STOP_SECONDS = 5.0  # a cancelled Helm run's time to exit after SIGTERM, within the daemon's 10 s (handlers/daemon.py)


class RenderedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader where PyYAML has it (its wheels do): a database's 100 KB render parses in
    0.015 s of CPU, against 0.17 s with pyhelm3's pure-Python loader. Like pyhelm3's, it reads a plain `=`
    as the string it is, not YAML 1.1's `value` type."""


RenderedLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_scalar)


class OperatorCommand(pyhelm3.Command):
    """pyhelm3's Command, plus what it lacks: Helm runs in the environment it is given (pyhelm3's
    own would inherit the operator's), Helm's --post-renderer on the commands that render, and no
    client-side OpenAPI validation on upgrade."""

    def __init__(self, *, post_renderer: tuple[str, str] | None, environment: Mapping[str, str], **kwargs: Any):
        super().__init__(**kwargs)
        self._post_renderer = post_renderer
        self.environment = dict(environment)

    async def run(self, command: list[str], input: bytes | None = None) -> bytes:  # noqa: A002 (pyhelm3's name)
        verb = command[0] if command else ""
        if verb == "upgrade":
            command = [*command, SKIP_CLIENT_VALIDATION]
        if not (self._post_renderer and verb in ("upgrade", "template")):
            return await self._helm(command, input)
        name, config = self._post_renderer
        with tempfile.TemporaryDirectory(prefix="mydb-postrender-") as scratch:
            reason = Path(scratch) / "error"
            try:
                return await self._helm(
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
            except helm_errors.Error:
                # Helm reports only "plugin exited with error"; the plugin left the reason here.
                if reason.exists():
                    raise HelmError(f"platform objectPatches: {reason.read_text()}") from None
                raise

    async def render(
        self, release: str, chart_ref: str, values: dict[str, Any], *, namespace: str, version: str | None
    ) -> list[dict[str, Any]]:
        """The objects `helm upgrade` would apply (`helm template`, neither hooks nor CRDs), parsed with libyaml."""
        command = ["template", release, chart_ref, "--skip-crds", "--no-hooks", "--values", "-"]
        command += ["--namespace", namespace]
        if version:
            command += ["--version", version]
        rendered = await self.run(command, json.dumps(values).encode())
        return [document for document in yaml.load_all(rendered, Loader=RenderedLoader) if document]

    async def _helm(self, command: list[str], input: bytes | None) -> bytes:  # noqa: A002 (pyhelm3's name)
        """pyhelm3 0.5's Command.run, with one change: the subprocess gets `self.environment`, not a copy
        of os.environ, and Helm runs itself, not under a shell. The same log lines and error classes."""
        argv: list[Any] = [self._executable, *command]
        if self._kubeconfig:
            argv.extend(["--kubeconfig", self._kubeconfig])
        if self._kubecontext:
            argv.extend(["--kube-context", self._kubecontext])
        if self._kubeapiserver:
            argv.extend(["--kube-apiserver", self._kubeapiserver])
        if self._kubetoken:
            argv.extend(["--kube-token", self._kubetoken])
        if self._insecure_skip_tls_verify:
            argv.append("--kube-insecure-skip-tls-verify")
        logged = shlex.join(_logged(str(part)) for part in argv)
        self._logger.info("running command: %s", logged)
        # Helm itself, not a shell around it (pyhelm3's way): a cancelled run's signals must reach Helm.
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *(str(part) for part in argv),
                stdin=asyncio.subprocess.PIPE if input is not None else None,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.environment,
            )
        )
        try:
            # Shielded: cancelled while its pipes are being connected, asyncio would SIGKILL a Helm already
            # running (no chance to mark its release failed); it is stopped like any other (seen in CI).
            process = await asyncio.shield(spawn)
            stdout, stderr = await process.communicate(input)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):  # it may have failed to start
                await stop(await spawn)
            raise
        if process.returncode == 0:
            self._logger.info("command succeeded: %s", logged)
            return stdout
        self._logger.warning("command failed: %s", logged)
        raise failure(process.returncode or 1, stdout, stderr)


async def stop(process: asyncio.subprocess.Process) -> None:
    """Stop a cancelled Helm run within STOP_SECONDS: SIGTERM (Helm marks the release failed), then SIGKILL.
    Helm that took longer to exit outlived its daemon's cancellation (kopf orphans it after 10 s), and its
    pipes were closed after the event loop: a traceback at the operator's exit."""
    try:
        process.terminate()
        await asyncio.wait_for(process.communicate(), STOP_SECONDS)
    except ProcessLookupError:
        return
    except (TimeoutError, asyncio.CancelledError):
        process.kill()
        await process.communicate()  # to the pipes' end: their transports close while the loop runs


def _logged(argument: str) -> str:
    """An argument as pyhelm3 logs it: stdin and multi-line values (a values file's text) by name. Pure."""
    if argument == "-":
        return "<stdin>"
    return "<multi-line string>" if "\n" in argument else argument


def failure(returncode: int, stdout: bytes, stderr: bytes) -> helm_errors.Error:
    """The pyhelm3 error class for what Helm printed, as pyhelm3 0.5's Command.run picks it (its Client
    catches ReleaseNotFoundError, for one). Pure."""
    said = stderr.decode().lower()
    error_class: type[helm_errors.Error] = helm_errors.Error
    if "context canceled" in said:
        error_class = helm_errors.CommandCancelledError
    elif "etcdserver" in said:  # before the not-found rules: it may come with one
        error_class = helm_errors.ConnectionError
    elif "release: not found" in said:
        error_class = helm_errors.ReleaseNotFoundError
    elif "failed to render chart" in said or "execution error" in said:
        error_class = helm_errors.FailedToRenderChartError
    elif "rendered manifests contain a resource that already exists" in said:
        error_class = helm_errors.ResourceAlreadyExistsError
    elif "is invalid" in said:
        error_class = helm_errors.InvalidResourceError
    elif CHART_NOT_FOUND.search(said) is not None:
        error_class = helm_errors.ChartNotFoundError
    elif CONNECTION_ERROR.search(said) is not None:
        error_class = helm_errors.ConnectionError
    return error_class(returncode, stdout, stderr)
