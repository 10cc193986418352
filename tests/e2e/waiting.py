"""Polling helpers: tests wait for conditions, they never sleep blindly."""

from __future__ import annotations

import json
import time
from typing import Any, Callable


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5) -> Any:
    """Return check()'s first truthy value; fail naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")


def get_json(cluster, *args: str) -> dict:
    """kubectl get ... -o json, parsed; {} when the object does not exist."""
    result = cluster.kubectl("get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr or "not found" in result.stderr:
            return {}
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)
