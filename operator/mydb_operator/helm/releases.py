"""One database's release through pyhelm3: render, install or upgrade (recovering a half-done one), uninstall."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import pydantic
import pyhelm3
import yaml
from pyhelm3 import errors as helm_errors
from pyhelm3.models import ReleaseRevisionStatus

from ..telemetry.metrics import helm_timer
from . import postrender
from .command import OperatorCommand
from .digest import chart_digest
from .errors import HelmError, helm_message

log = logging.getLogger(__name__)

# Release records hold only values and manifests, never a password (the chart
# reads the credentials Secret by name), so ConfigMaps are the right storage:
# the operator then needs no list/watch on Secrets at all.
HELM_DRIVER = "configmap"
# Each Helm run is a short single task, several at once: one Go thread each takes about 9 %
# less CPU per install at no memory cost (a lazier collector, GOGC=200, saved 15-20 % but cost
# 6 MB per run: docs/benchmarks.md, round 6). The operator's environment wins.
GO_RUNTIME = {"GOMAXPROCS": "1"}
# Helm's variable that names its plugins folder: the operator's own, when it has a post-renderer.
PLUGINS_VARIABLE = "HELM_PLUGINS"
# What Helm says of a release a killed run left half-done: pending-install/upgrade/rollback,
# or "uninstalling" (a recovery of a pending install was itself killed).
LEFT_HALF_DONE = ("another operation (install/upgrade/rollback) is in progress", "has no deployed releases")


@dataclass(frozen=True)
class AppliedRelease:
    name: str
    revision: int
    status: str
    chart: str


def one_line(error: BaseException) -> str:
    """An error's first line (a YAML or validation error spans several). Pure."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def helm_environment(environment: Mapping[str, str], plugins: Path | None) -> dict[str, str]:
    """What every Helm run gets: the given environment (the operator's, from its settings) over the
    operator's defaults for Helm (HELM_DRIVER, GOMAXPROCS), and the operator's plugins folder if any. Pure."""
    defaults = {"HELM_DRIVER": HELM_DRIVER, **GO_RUNTIME}
    plugin = {PLUGINS_VARIABLE: str(plugins)} if plugins is not None else {}
    return {**defaults, **environment, **plugin}


class Helm:
    """Helm for every database: one chart (loaded once), one digest, at most `max_parallel` runs at a time.

    Helm runs in the environment given (never the operator's os.environ, which stays as it was). With
    a post-renderer it holds a temporary plugins folder: close() it (or use it as a context manager)."""

    def __init__(
        self,
        chart_dir: Path,
        *,
        environment: Mapping[str, str],
        executable: str = "helm",
        history_max: int = 5,
        timeout: str = "2m",
        max_parallel: int,
        platform_config: Path | None = None,
        post_render: bool = False,
    ):
        if not shutil.which(executable, path=environment.get("PATH", os.defpath)):
            raise HelmError(f"no helm executable {executable!r} (set MYDB_HELM or --helm)")
        if not (chart_dir / "Chart.yaml").is_file():
            raise HelmError(f"no chart at {chart_dir} (set MYDB_CHART_DIR or --chart)")
        self.chart_dir = chart_dir
        # A changed chart or platform config changes the hash of every release: Helm runs again.
        self.digest = chart_digest(chart_dir, platform_config if post_render else None)
        self.plugins: Path | None = None
        post_renderer = None
        if post_render and platform_config is not None:
            # Helm 4 post-renderers are plugins: a private plugin folder holds ours, removed by close().
            self.plugins = Path(tempfile.mkdtemp(prefix="mydb-helm-plugins-"))
            try:
                postrender.write_plugin(self.plugins)
            except BaseException:
                self.close()
                raise
            post_renderer = (postrender.PLUGIN_NAME, str(Path(platform_config).resolve()))
        self.command = OperatorCommand(
            post_renderer=post_renderer,
            environment=helm_environment(environment, self.plugins),
            executable=executable,
            history_max_revisions=history_max,
            default_timeout=timeout,
        )
        self.client = pyhelm3.Client(command=self.command, executable=executable)
        self._chart: pyhelm3.Chart | None = None
        self._default_values: dict[str, Any] | None = None
        # Helm runs are CPU-heavy subprocesses: bound them so hundreds of databases
        # queue instead of starving the API server on a small machine.
        self.max_parallel = max_parallel
        self._slots = asyncio.Semaphore(max_parallel)

    def close(self) -> None:
        """Remove the temporary plugins folder, if any; Helm must not run afterwards. Idempotent."""
        if self.plugins is not None:
            shutil.rmtree(self.plugins, ignore_errors=True)
            self.plugins = None

    def __enter__(self) -> Helm:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    async def chart(self) -> pyhelm3.Chart:
        """The chart, its metadata read from its Chart.yaml: what `helm show chart` prints, without a Helm run
        (the chart is a directory, pulled into one when it came from a registry: chart_source.py)."""
        if self._chart is None:
            try:
                metadata = yaml.safe_load((self.chart_dir / "Chart.yaml").read_text())
                # pyhelm3's models take the Helm command beside their fields, which pydantic's mypy plugin misses.
                self._chart = pyhelm3.Chart(  # type: ignore[call-arg]
                    _command=self.command, ref=self.chart_dir, repo=None, metadata=metadata
                )
            except (OSError, yaml.YAMLError, pydantic.ValidationError) as error:
                raise HelmError(f"cannot load the chart {self.chart_dir}: {one_line(error)}") from None
        return self._chart

    async def default_values(self) -> dict[str, Any]:
        """The chart's own values.yaml (what a chart declares it takes), as `helm show values` prints it."""
        if self._default_values is None:
            path = self.chart_dir / "values.yaml"
            try:
                loaded = yaml.safe_load(path.read_text()) if path.exists() else {}
            except (OSError, yaml.YAMLError) as error:
                raise HelmError(f"cannot read the chart's values {path}: {one_line(error)}") from None
            if not isinstance(loaded, dict | None):
                raise HelmError(f"cannot read the chart's values {path}: not a mapping")
            self._default_values = dict(loaded or {})
        return self._default_values

    async def template(self, namespace: str, release: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        """The objects `upgrade` would apply. Hooks are left out: `helm upgrade` does not apply the chart's
        `helm test` pod (only `helm test` does), and a dry-run must equal what is applied."""
        chart = await self.chart()
        try:
            async with self._slots, helm_timer("template"):
                # The Command, not the Client: the Client parses the render with pure-Python YAML.
                return await self.command.render(
                    release, str(chart.ref), values, namespace=namespace, version=chart.metadata.version
                )
        except helm_errors.Error as error:
            raise HelmError(helm_message(error)) from None

    async def upgrade(self, namespace: str, release: str, values: dict[str, Any]) -> AppliedRelease:
        """helm upgrade --install; a release a crash left half-done is recovered once, then retried."""
        try:
            return await self._upgrade(namespace, release, values)
        except helm_errors.Error as error:
            if not any(sign in helm_message(error) for sign in LEFT_HALF_DONE):
                raise HelmError(helm_message(error)) from None
        log.warning("release %s/%s was left half-done (pending or uninstalling): recovering it", namespace, release)
        try:
            async with self._slots, helm_timer("recover"):
                await self._recover(namespace, release)
            return await self._upgrade(namespace, release, values)
        except helm_errors.Error as error:
            raise HelmError(helm_message(error)) from None

    async def _recover(self, namespace: str, release: str) -> None:
        """Make a half-done release proceedable. A pending install (or an uninstall of one, itself cut short)
        is uninstalled, waiting for its objects to go so that the install after it can make them again. A pending
        upgrade or rollback is rolled back to its last revision without waiting for its pods: the upgrade that
        follows applies the wanted state at once (pyhelm3's get_proceedable_revision waits, and a database's
        pods in the middle of a major upgrade held that wait, and a Helm slot, for the whole 2-minute timeout)."""
        current = await self.client.get_current_revision(release, namespace=namespace)
        if current.status in (ReleaseRevisionStatus.PENDING_INSTALL, ReleaseRevisionStatus.UNINSTALLING):
            await self.command.uninstall(release, namespace=namespace, wait=True)
        elif current.status in (ReleaseRevisionStatus.PENDING_UPGRADE, ReleaseRevisionStatus.PENDING_ROLLBACK):
            await self.command.rollback(release, None, namespace=namespace, cleanup_on_fail=True, wait=False)

    async def _upgrade(self, namespace: str, release: str, values: dict[str, Any]) -> AppliedRelease:
        chart = await self.chart()
        async with self._slots, helm_timer("upgrade"):
            # The Command, not the Client: the Client parses the whole rendered manifest
            # with pure-Python YAML on the event loop, and nothing here needs it.
            # force_conflicts: Helm applies server-side, and a field someone edited by hand
            # (kubectl scale, kubectl patch) must go back to the release's value, not block it.
            answer = await self.command.install_or_upgrade(
                release,
                str(chart.ref),
                values,
                namespace=namespace,
                create_namespace=False,
                force_conflicts=True,
                version=chart.metadata.version,
            )
        result = cast(dict[str, Any], answer)  # pyhelm3 says Iterable; `helm upgrade -o json` is one object
        return AppliedRelease(
            name=release,
            revision=int(result["version"]),
            status=str(result["info"]["status"]),
            chart=f"{chart.metadata.name}-{chart.metadata.version}",
        )

    async def uninstall(self, namespace: str, release: str) -> None:
        try:
            async with self._slots, helm_timer("uninstall"):
                await self.client.uninstall_release(release, namespace=namespace, wait=False)
        except helm_errors.Error as error:
            raise HelmError(helm_message(error)) from None
