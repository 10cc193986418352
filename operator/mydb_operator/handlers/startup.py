"""Start-up and clean-up: kopf's settings, Helm, the platform config, the informers, metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import kopf

from .. import names
from ..cluster import clients
from ..cluster.child_store import ChildStore
from ..cluster.informers import Informer, start_informers
from ..config import CONFIG
from ..desired.platform import load_platform
from ..helm.releases import Helm
from ..reconcile.runtime import Runtime
from ..telemetry import metrics
from .wakeups import poke

log = logging.getLogger(__name__)
_runtime: Runtime | None = None
INFORMERS: list[Informer] = []


def runtime() -> Runtime:
    """What configure() made; every other handler runs after it."""
    if _runtime is None:
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return _runtime


def apply_settings(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = names.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=names.ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    # Events are posted only where the operator says so (kopf.event), never as a
    # copy of every log line: that would be an API write per watched pod event.
    settings.posting.loggers = False
    settings.peering.standalone = True
    if CONFIG.namespaces:
        # Namespaces are listed explicitly: no cluster-wide scan of namespaces (and no right to it).
        settings.scanning.disabled = True


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _runtime
    clients.load_config()
    apply_settings(settings)
    platform = load_platform(CONFIG.platform_config)  # checked by the CLI before kopf starts
    helm = Helm(
        CONFIG.chart_dir,
        executable=CONFIG.helm,
        history_max=CONFIG.history_max,
        max_parallel=CONFIG.helm_parallel,
        platform_config=CONFIG.platform_config,
        post_render=bool(platform.object_patches),
    )
    loop = asyncio.get_running_loop()
    store = ChildStore(on_change=poke)

    def deliver(update: Callable[..., None], *args: Any) -> None:
        loop.call_soon_threadsafe(update, *args)  # the store is touched only from the event loop

    INFORMERS[:] = start_informers(store, CONFIG.namespaces, deliver=deliver)
    _runtime = Runtime(helm=helm, children=store, platform=platform)
    metrics.serve(CONFIG.metrics_port)
    log.info(
        "chart %s (digest %s), helm %s, platform config %s, metrics on :%s",
        CONFIG.chart_dir,
        helm.digest,
        helm.client.version,
        CONFIG.platform_config or "none",
        CONFIG.metrics_port or "off",
    )


@kopf.on.cleanup()
async def stop_informers(**_: Any) -> None:
    for informer in INFORMERS:
        informer.stop()
