"""Blocking client calls made awaitable, and API statuses that mean "already so".

Each call is a small blocking request on the port's client; `threaded` runs it
in a worker thread, so the event loop never waits on the network."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from kubernetes.client.exceptions import ApiException

P = ParamSpec("P")
R = TypeVar("R")


def threaded(call: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    @functools.wraps(call)
    async def in_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(call, *args, **kwargs)

    return in_thread


class tolerating:  # noqa: N801 (read as a function: `with tolerating(404):`)
    """Swallow an ApiException of one status code (404: already gone, 409: already there).

    A class, not @contextmanager: its __exit__ says it may swallow, so the type
    checker knows the code after the `with` block is reachable."""

    def __init__(self, status: int) -> None:
        self.status = status

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> bool:
        return isinstance(error, ApiException) and error.status == self.status


def _succeeds_unless(status: int, call: Callable[[], Any]) -> bool:
    """True when `call` succeeded, False when it failed with `status`; any other failure is raised."""
    try:
        call()
        return True
    except ApiException as error:
        if error.status == status:
            return False
        raise


def created(create: Callable[[], Any]) -> bool:
    """Run a create call: True when it made the object now, False when the object was already there (409)."""
    return _succeeds_unless(409, create)


def exists(read: Callable[[], Any]) -> bool:
    """Run a read call: True when the object is there, False when it is not (404)."""
    return _succeeds_unless(404, read)
