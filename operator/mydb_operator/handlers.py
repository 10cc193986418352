"""kopf wiring: thin handlers that hand each MyDatabase to a long-lived reconcile loop.

Each MyDatabase gets one daemon. It reconciles when poked (its spec changed,
or the informers saw one of its pods, claims, StatefulSet, Services, CronJob or
Jobs change) and every resync interval otherwise; between pokes it sleeps. Helm runs only when the
values hash differs from the applied one, or when a child object drifted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import kopf
import kubernetes
import urllib3

from . import api, backups, children, kube, metrics
from .config import CONFIG
from .helm import Helm, HelmError
from .model import SpecError, parse_spec
from .platform import load_platform
from .reconcile import Runtime, reconcile, status_patch
from .status import DELETING
from .values import credentials_secret_name

log = logging.getLogger(__name__)
RUNTIME: Runtime | None = None
INFORMERS: list[children.Informer] = []
POKES: dict[tuple[str, str], asyncio.Event] = {}
BACKOFF_FIRST, BACKOFF_MAX = 5.0, 300.0
DEBOUNCE = 0.5  # seconds between reconciles of one database, so a burst of events becomes one


def poke(namespace: str | None, name: str | None) -> None:
    event = POKES.get((namespace or "", name or ""))
    if event is not None:
        event.set()


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global RUNTIME
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    settings.persistence.finalizer = api.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api.ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=api.ANNOTATION_PREFIX, key="last-handled-configuration")
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
    platform = load_platform(CONFIG.platform_config)  # checked by the CLI before kopf starts
    helm = Helm(CONFIG.chart_dir, executable=CONFIG.helm, history_max=CONFIG.history_max,
                max_parallel=CONFIG.helm_parallel, platform_config=CONFIG.platform_config,
                post_render=bool(platform.object_patches))
    loop = asyncio.get_running_loop()
    store = children.ChildStore(on_change=poke)
    INFORMERS[:] = children.start_informers(store, CONFIG.namespaces,
                                            deliver=lambda update, *args: loop.call_soon_threadsafe(update, *args))
    RUNTIME = Runtime(helm=helm, children=store, platform=platform)
    metrics.serve(CONFIG.metrics_port)
    log.info("chart %s (digest %s), helm %s, platform config %s, metrics on :%s", CONFIG.chart_dir, helm.digest,
             helm.client.version, CONFIG.platform_config or "none", CONFIG.metrics_port or "off")


@kopf.daemon(api.GROUP, api.VERSION, api.PLURAL, cancellation_timeout=10.0)
async def run_database(body: kopf.Body, name: str, namespace: str, stopped: kopf.DaemonStopped,
                       **_: Any) -> None:
    """Reconcile one database until it is deleted or the operator stops."""
    key = (namespace, name)
    wake = POKES.setdefault(key, asyncio.Event())
    known_status: dict[str, Any] | None = None
    failures = 0
    try:
        while not stopped:
            wake.clear()
            snapshot = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}
            delay = CONFIG.resync_seconds
            started = time.perf_counter()
            try:
                outcome = await reconcile(snapshot, known_status, RUNTIME)
                previous = known_status if known_status is not None else snapshot["status"]
                patch = status_patch(previous, outcome.status)
                if patch is not None:
                    await kube.patch_status(namespace, name, patch)
                    metrics.STATUS_WRITES.inc()
                metrics.set_phase(key, outcome.status["phase"])
                metrics.RECONCILES.labels("problem" if outcome.problem else "ok").inc()
                if known_status is None and not outcome.events:
                    revision = (outcome.status.get("release") or {}).get("revision")
                    log.info("%s/%s: up to date at helm revision %s, no helm run needed", namespace, name, revision)
                known_status = outcome.status
                for type_, reason, message in outcome.events:
                    kopf.event(body, type=type_, reason=reason, message=message)
                if outcome.problem:
                    metrics.ERRORS.labels(outcome.problem.reason).inc()
                    failures += 1
                    delay = min(BACKOFF_FIRST * 2 ** (failures - 1), BACKOFF_MAX)
                    log.warning("%s/%s: %s: %s (retry in %.0fs)", namespace, name,
                                outcome.problem.reason, outcome.problem.message, delay)
                else:
                    failures = 0
            except (kubernetes.client.exceptions.ApiException, urllib3.exceptions.HTTPError, OSError) as error:
                # The API refused, or could not be reached (it restarts, the network drops):
                # one line, then the same back-off; the loop itself never dies of it.
                reason = f"Api{error.status}" if isinstance(error, kubernetes.client.exceptions.ApiException) \
                    else "ApiUnreachable"
                metrics.RECONCILES.labels("error").inc()
                metrics.ERRORS.labels(reason).inc()
                failures += 1
                delay = min(BACKOFF_FIRST * 2 ** (failures - 1), BACKOFF_MAX)
                log.warning("%s/%s: %s: %s (retry in %.0fs)", namespace, name, reason,
                            getattr(error, "reason", None) or type(error).__name__, delay)
            metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
            if await sleep_until_poked(wake, stopped, delay):
                # At most one reconcile per DEBOUNCE: a burst of events folds into one, while
                # a change after a quiet spell (the last pod turning Ready) is handled at once.
                await asyncio.sleep(max(0.0, DEBOUNCE - (time.perf_counter() - started)))
    finally:
        if POKES.get(key) is wake:
            del POKES[key]
            metrics.set_phase(key, None)


async def sleep_until_poked(wake: asyncio.Event, stopped: kopf.DaemonStopped, delay: float) -> bool:
    """Sleep up to `delay`; True if poked. Returns at once when kopf stops the daemon."""
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return wake.is_set() and not stopped


@kopf.on.event(api.GROUP, api.VERSION, api.PLURAL)
def mydatabase_changed(meta: kopf.Meta, status: kopf.Status, **_: Any) -> None:
    """A new generation (spec edit, kubectl scale) or backup request is worth an immediate reconcile."""
    if meta.get("generation") != status.get("observedGeneration") or backups.requested(
            dict(meta.get("annotations") or {}), dict(status)):
        poke(meta.get("namespace"), meta.get("name"))


@kopf.on.cleanup()
async def stop_informers(**_: Any) -> None:
    for informer in INFORMERS:
        informer.stop()


@kopf.on.delete(api.GROUP, api.VERSION, api.PLURAL)
async def delete_database(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str, **_: Any) -> None:
    """Uninstall the release; keep the data and its Secret unless deletionPolicy is Delete."""
    try:
        parsed = parse_spec(dict(spec))
        policy, own_secret = parsed.deletion_policy, not parsed.existing_secret
    except SpecError:
        policy, own_secret = api.DELETION_RETAIN, False  # when in doubt, keep the data
    try:
        await kube.patch_status(namespace, name, {"phase": DELETING, "ready": False})
        await RUNTIME.helm.uninstall(name, namespace)
        if policy == api.DELETION_DELETE:
            claims = await kube.delete_claims(namespace, name)
            if own_secret:  # a Secret the user supplied is theirs to delete
                await kube.delete_secret(namespace, credentials_secret_name(name))
    except HelmError as error:
        raise kopf.TemporaryError(f"helm uninstall failed: {error}", delay=10) from None
    except (kubernetes.client.exceptions.ApiException, urllib3.exceptions.HTTPError, OSError) as error:
        raise kopf.TemporaryError(f"deleting: {getattr(error, 'reason', None) or error}", delay=10) from None
    if policy == api.DELETION_DELETE:
        log.info("%s/%s: deleted, with claims %s and the operator's Secret (deletionPolicy Delete)",
                 namespace, name, claims)
    else:
        log.info("%s/%s: deleted; its claims and Secret are kept (deletionPolicy Retain)", namespace, name)
