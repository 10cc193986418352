"""Start-up and clean-up: kopf's settings, the informers, metrics.

The platform config and the chart were checked by the CLI before kopf started
(commands/preflight.py); their Helm and Platform arrive in the memo."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import kopf

from .. import names
from ..cluster import clients
from ..cluster.informers import first_listings, start_informers
from ..model.namespaces import any_pattern
from ..reconcile.namespace_deletion import let_go_in_deleted_namespaces
from ..telemetry import metrics
from .memo import OperatorMemo

log = logging.getLogger(__name__)
# kopf starts the databases' daemons after the start-up handlers: they wait this long at most
# for the informers' first listing, as a controller waits for its caches to sync.
FIRST_LISTING_SECONDS = 20.0


class NoDiffBase(kopf.DiffBaseStorage):
    """Keeps no last-handled configuration. kopf diffs against it only for create, update and field
    handlers, and the operator has none: the daemon compares the spec with status.release itself.
    Storing one would be an API write per new database that nothing reads."""

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def apply_settings(settings: kopf.OperatorSettings, namespaces: tuple[str, ...]) -> None:
    settings.persistence.finalizer = names.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    # Events are posted only where the operator says so (kopf.event), never as a
    # copy of every log line: that would be an API write per watched pod event.
    settings.posting.loggers = False
    settings.peering.standalone = True
    if namespaces and not any_pattern(namespaces):
        # Namespaces named one by one: no cluster-wide scan of namespaces (and no right to it). A pattern
        # ("team-*") needs that scan: kopf lists and watches the namespaces to find the ones it matches.
        settings.scanning.disabled = True


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: OperatorMemo, **_: Any) -> None:
    config, runtime = memo.config, memo.runtime
    clients.load_config()
    apply_settings(settings, config.namespaces)
    loop = asyncio.get_running_loop()

    def deliver(update: Callable[..., None], *args: Any) -> None:
        loop.call_soon_threadsafe(update, *args)  # the store is touched only from the event loop

    memo.informers[:] = start_informers(runtime.children, list(config.namespaces), deliver=deliver, api=memo.api)
    if not await first_listings(runtime.children, memo.informers, list(config.namespaces), FIRST_LISTING_SECONDS):
        log.warning(
            "the informers have not listed every kind in %.0fs: reconciles read the API until they have",
            FIRST_LISTING_SECONDS,
        )
    if any_pattern(config.namespaces):  # kopf will not watch a namespace that is being deleted already
        await let_go_in_deleted_namespaces(runtime.api, config.namespaces)
    metrics.serve(config.metrics_port)
    log.info(
        "chart %s (digest %s), helm %s, platform config %s, metrics on :%s",
        config.chart_dir,
        runtime.helm.digest,
        runtime.helm.client.version,
        config.platform_config or "none",
        config.metrics_port or "off",
    )


@kopf.on.cleanup()
async def stop_informers(memo: OperatorMemo, **_: Any) -> None:
    for informer in memo.informers:
        informer.stop()
