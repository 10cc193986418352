"""The start-up check: the platform config and the chart, each checked once, before kopf starts."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..config import Config
from ..desired.platform import Platform, PlatformError, load_platform
from ..helm import chart_check
from ..helm.errors import HelmError
from ..helm.releases import Helm

if TYPE_CHECKING:
    from ..handlers.memo import OperatorMemo


def platform(config: Config) -> Platform:
    try:
        return load_platform(config.platform_config)
    except PlatformError as error:
        raise SystemExit(f"mydb-operator: platform config: {error}") from None


def make_helm(config: Config, loaded: Platform) -> Helm:
    try:
        return Helm(
            config.chart_dir,
            executable=config.helm,
            history_max=config.history_max,
            max_parallel=config.helm_parallel,
            platform_config=config.platform_config,
            post_render=bool(loaded.object_patches),
        )
    except HelmError as error:
        raise SystemExit(f"mydb-operator: {error}") from None


def prepare_operator(config: Config, runner: asyncio.Runner) -> OperatorMemo:
    """Check the platform config and the chart, once, before kopf starts; fail fast and plainly.

    The Helm and platform checked here are the ones the handlers use (kopf's memo),
    and the check runs on the event loop kopf then runs on."""
    from ..handlers.memo import operator_memo

    loaded = platform(config)
    helm = make_helm(config, loaded)
    problems = runner.run(chart_check.incompatibilities(helm, loaded))
    if problems:
        raise SystemExit(
            "mydb-operator: the chart "
            + (config.chart_origin or str(config.chart_dir))
            + " does not fit the operator:\n  "
            + "\n  ".join(problems)
        )
    return operator_memo(config, loaded, helm)
