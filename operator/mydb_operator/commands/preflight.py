"""The start-up check: the platform config and the chart, each checked once, before kopf starts."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..config import Config
from ..desired.platform import Platform, PlatformError, admitting_operator, load_platform
from ..helm import chart_check
from ..helm.errors import HelmError
from ..helm.releases import Helm

if TYPE_CHECKING:
    from ..handlers.memo import OperatorMemo

log = logging.getLogger(__name__)


def platform(config: Config) -> Platform:
    try:
        return load_platform(config.platform_config)
    except PlatformError as error:
        raise SystemExit(f"mydb-operator: platform config: {error}") from None


def make_helm(config: Config, loaded: Platform) -> Helm:
    """The one Helm for the settings' chart, in the settings' environment; close it when done."""
    if config.chart_dir is None:  # settings.load pulls an OCI chart for every command that renders it
        raise SystemExit(f"mydb-operator: the chart {config.chart_origin} was not pulled")
    try:
        return Helm(
            config.chart_dir,
            environment=config.environment,
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
    and the check runs on the event loop kopf then runs on. The caller closes the memo (its Helm);
    a failed check closes it here."""
    loaded = platform(config)
    helm = make_helm(config, loaded)
    try:
        return _checked_memo(config, runner, loaded, helm)
    except BaseException:
        helm.close()
        raise


def _checked_memo(config: Config, runner: asyncio.Runner, loaded: Platform, helm: Helm) -> OperatorMemo:
    # Here, not at the top: `render` and `values` share this module and need neither the API client nor the handlers.
    from ..cluster.api import KubernetesApi
    from ..handlers.memo import operator_memo

    chart = config.chart_origin or str(config.chart_dir)
    fit = runner.run(chart_check.check_chart(helm, loaded))
    if fit.problems:
        raise SystemExit(f"mydb-operator: the chart {chart} does not fit the operator:\n  " + "\n  ".join(fit.problems))
    if fit.takes_owner and fit.unowned:
        log.warning(
            "the chart %s takes an owner but renders %s without its ownerReference: deleting a database "
            "runs helm uninstall (slower) so that nothing is left behind",
            chart,
            ", ".join(fit.unowned),
        )
    if "networkPolicy.operator" in fit.value_keys:  # the bundled chart's; a platform's own may lack it
        loaded = admitting_operator(loaded, config.operator_namespace)
    return operator_memo(
        config,
        loaded,
        helm,
        KubernetesApi(),  # its client is made on first use, once kopf's start-up has loaded the config
        owns_children=fit.owns_children,
        pod_management=fit.pod_management,
        chart_keys=fit.value_keys,
        port=fit.port,
    )
