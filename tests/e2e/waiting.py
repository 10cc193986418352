"""Polling helpers: tests wait for conditions, they never sleep blindly."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from .apireads import reads_for


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
    """kubectl get ... -o json, parsed; {} when the object does not exist. A plain read goes straight to the
    API server (apireads.py: what kubectl would print, for a fraction of its CPU)."""
    read = reads_for(cluster.kubeconfig).get(("get", *args))
    if read is not None:
        return read
    result = cluster.kubectl("get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr or "not found" in result.stderr:
            return {}
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


def printed(cluster, namespace: str, kind: str, name: str) -> dict[str, str]:
    """`kubectl get KIND NAME`'s table as {column: value}, cut at the header's positions (an empty cell stays)."""
    header, row = cluster.kubectl("get", kind, name, "-n", namespace).stdout.splitlines()[:2]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    ends = starts[1:] + [max(len(header), len(row))]
    return {header[s:e].strip(): row[s:e].strip() for s, e in zip(starts, ends)}
