"""The daemon of one MyDatabase: reconcile, post its Events, sleep until poked or resync, back off on failure."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import kopf

from .. import names
from ..cluster.failures import API_FAILURES, failure_detail, failure_reason
from ..model.errors import SpecError
from ..model.spec import parse_spec
from ..policy.backoff import Backoff, problem_retry_delay
from ..reconcile.namespace_deletion import events_to_post, let_go_in_deleted_namespace
from ..reconcile.reporting import StoredStatus, count_api_failure, reconcile_and_store
from ..reconcile.topology import SIGHTING_INTERVAL_SECONDS, read_position
from ..telemetry import metrics
from .memo import OperatorMemo
from .wakeups import sleep_until_poked

log = logging.getLogger(__name__)
DEBOUNCE = 0.5  # seconds between reconciles of one database, so a burst of events becomes one
# kopf cancels a daemon this long after telling it to stop (deletion, shutdown); a Helm run it is
# in then ends, and pyhelm3 waits for the process.
CANCELLATION_SECONDS = 10.0


def snapshot_of(body: kopf.Body) -> dict[str, Any]:
    """The resource as it is now: kopf updates `body` in place while a reconcile runs."""
    return {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}


@kopf.daemon(names.GROUP, names.VERSION, names.PLURAL, cancellation_timeout=CANCELLATION_SECONDS)
async def run_database(
    body: kopf.Body, namespace: str | None, name: str, stopped: kopf.DaemonStopped, memo: OperatorMemo, **_: Any
) -> None:
    """Reconcile one database until it is deleted or the operator stops."""
    assert namespace is not None  # MyDatabase is a namespaced resource
    key = (namespace, name)
    wake = memo.wakeups.register(key)
    stored = StoredStatus()
    backoff = Backoff()
    try:
        while not stopped:
            wake.clear()
            delay = memo.config.resync_seconds
            started = time.perf_counter()
            failed = True
            outcome_reads_position = False
            try:
                first_pass = stored.status is None
                outcome = await reconcile_and_store(snapshot_of(body), stored, memo.runtime)
                if first_pass and not outcome.helm_ran and not outcome.problem:
                    revision = (outcome.status.get("release") or {}).get("revision")
                    log.info("%s/%s: up to date at helm revision %s, no helm run needed", namespace, name, revision)
                for type_, reason, message in await events_to_post(memo.runtime, namespace, outcome.events):
                    kopf.event(body, type=type_, reason=reason, message=message)
                if outcome.problem:
                    delay = problem_retry_delay(outcome.problem.reason, backoff.failed(), memo.config.resync_seconds)
                    log.warning(
                        "%s/%s: %s: %s (retry in %.0fs)",
                        namespace,
                        name,
                        outcome.problem.reason,
                        outcome.problem.message,
                        delay,
                    )
                elif outcome.retry_soon:  # stored, but a step after Helm failed: its one log line said which
                    delay = backoff.failed()
                else:
                    backoff.succeeded()
                    failed = False
                outcome_reads_position = outcome.reads_position
                if outcome.recheck is not None:  # a failover under way: time alone moves it on
                    delay = min(delay, outcome.recheck)
                held = stored.write_due_in()
                if held is not None:  # a held status change is written by the pass after the hold
                    delay = min(delay, held)
            except API_FAILURES as error:
                # The API refused, or could not be reached (it restarts, the network drops):
                # one line, then the same back-off; the loop itself never dies of it.
                reason = failure_reason(error)
                count_api_failure(reason)
                delay = backoff.failed()
                log.warning("%s/%s: %s: %s (retry in %.0fs)", namespace, name, reason, failure_detail(error), delay)
            metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
            if failed and not stopped and await let_go_in_deleted_namespace(memo.runtime, namespace, name):
                memo.runtime.rollouts.leave(key)
                return
            reads_position = not failed and outcome_reads_position
            if await idle_until_poked(key, body, wake, stopped, delay, reads_position, memo):
                # At most one reconcile per DEBOUNCE: a burst of events folds into one, while
                # a change after a quiet spell (the last pod turning Ready) is handled at once.
                await asyncio.sleep(max(0.0, DEBOUNCE - (time.perf_counter() - started)))
    finally:
        if memo.wakeups.unregister(key, wake):
            memo.runtime.watches.forget(key)
            metrics.set_phase(key, None)
            metrics.set_volumes(key, {})
            metrics.set_replicas(key, {})


async def idle_until_poked(
    key: tuple[str, str],
    body: kopf.Body,
    wake: asyncio.Event,
    stopped: kopf.DaemonStopped,
    delay: float,
    reads_position: bool,
    memo: OperatorMemo,
) -> bool:
    """Sleep until the next pass is due, or poked (True). READS_POSITION: meanwhile, every
    SIGHTING_INTERVAL_SECONDS, the primary alone is asked for its position; a primary that does not answer as
    one ends the sleep at once (False: a whole pass looks)."""
    deadline = time.monotonic() + delay
    while True:
        left = deadline - time.monotonic()
        nap = min(left, SIGHTING_INTERVAL_SECONDS) if reads_position else left
        if await sleep_until_poked(wake, stopped, max(0.0, nap)):
            return True
        if stopped or not reads_position or deadline - time.monotonic() <= 0:
            return False
        try:
            spec = parse_spec(dict(body.spec))
        except SpecError:
            return False
        if not await read_position(key[0], key[1], spec, memo.runtime):
            return False
