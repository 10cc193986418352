"""mydb-operator run: check once, elect a leader, then hand kopf the handlers and their memo."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from ..config import Config
from ..memory import tune_malloc
from ..telemetry import logs
from .leader_election import lead
from .preflight import prepare_operator

log = logging.getLogger(__name__)


def run_operator(config: Config) -> None:
    """Check the chart once, wait to lead (unless --leader-elect=false), then run kopf until it stops."""
    tune_malloc()  # first: before any thread starts
    import kopf

    from .. import handlers  # noqa: F401  (registers the handlers)
    from ..leadership.conflicts import ScopeConflict

    with asyncio.Runner() as runner:
        memo = prepare_operator(config, runner)
        lease = None
        try:
            logs.configure(config.log_format)
            if config.leader_elect:
                try:
                    lease = lead(config, memo.api, before_exit=memo.close)
                except ScopeConflict as conflict:
                    log.error("%s", conflict)
                    raise SystemExit(2) from None
            else:
                log.warning(
                    "leader election is off (--leader-elect=false): nothing stops a second mydb-operator "
                    "instance from acting on the same databases at the same time; make sure only one runs"
                )
            kopf.run(
                loop=runner.get_loop(),
                memo=memo,
                clusterwide=not config.namespaces,
                namespaces=config.namespaces,
                standalone=True,
                # kopf's own default asks the passwd database for the user name,
                # and the image's numeric user has no entry there. (kopf types it as
                # its own NewType of str, which it does not export.)
                identity=cast(Any, config.identity),
                liveness_endpoint=f"http://0.0.0.0:{config.health_port}/healthz" if config.health_port else None,
            )
        finally:
            if lease is not None:
                lease.release()
            memo.close()  # Helm's temporary plugins folder: nothing is left behind
            # Closing the loop then closes what kopf left open: its watch streams' generators.
            runner.get_loop().set_exception_handler(_quiet_about_kopf_watch_streams)


def _quiet_about_kopf_watch_streams(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """kopf stops by cancelling the tasks that read its watch streams, which leaves each stream's async
    generator suspended; closing one at loop shutdown can raise inside kopf's own cleanup ("generator
    didn't stop after athrow()"). The operator has stopped by then and nothing is lost: one debug line,
    not a traceback that reads like a crash. Anything else goes to asyncio's default handler."""
    generator = context.get("asyncgen")
    if generator is not None and getattr(generator, "__qualname__", "") == "infinite_watch":
        log.debug("kopf's watch stream did not close cleanly at shutdown: %s", context.get("exception"))
        return
    loop.default_exception_handler(context)
