"""At shutdown, a kopf watch stream that does not close cleanly is one debug line; anything else still
reaches asyncio's default handler."""

from __future__ import annotations

import asyncio
import logging

from mydb_operator.commands.run import _quiet_about_kopf_watch_streams


async def infinite_watch():  # the name of kopf's generator
    yield 1


async def something_else():
    yield 1


def test_only_kopf_watch_streams_are_quieted(caplog):
    loop = asyncio.new_event_loop()
    seen = []
    loop.default_exception_handler = seen.append  # type: ignore[method-assign]
    try:
        kopf_stream, other = infinite_watch(), something_else()
        error = RuntimeError("generator didn't stop after athrow()")
        with caplog.at_level(logging.DEBUG, logger="mydb_operator.commands.run"):
            _quiet_about_kopf_watch_streams(loop, {"message": "closing", "asyncgen": kopf_stream, "exception": error})
        assert seen == [] and "did not close cleanly" in caplog.text
        context = {"message": "closing", "asyncgen": other, "exception": error}
        _quiet_about_kopf_watch_streams(loop, context)
        _quiet_about_kopf_watch_streams(loop, {"message": "a task failed"})
        assert seen == [context, {"message": "a task failed"}]
    finally:
        loop.close()
