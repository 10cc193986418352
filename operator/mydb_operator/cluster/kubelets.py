"""The kubelets' summary API: how full each volume on a node is.

The operator asks a node's kubelet itself, at https://<InternalIP>:<kubelet port>/stats/summary, as
metrics-server does, with the credentials it uses for the API server. The kubelet authorizes that path
as `nodes/stats` get: a narrower right than the API server's node proxy (`nodes/proxy` reaches every
kubelet endpoint, exec included). The kubelet's serving certificate is verified with the API server's
CA (the connection pool of the operator's client); a kubelet whose certificate that CA did not sign
gives no figures, and the status says the usage is unknown."""

from __future__ import annotations

import json
import time
from typing import Any

import urllib3
from kubernetes import client

from ..model.volumes import kubelet_endpoint
from .blocking import threaded
from .clients import Connection

# A node that does not answer must not hold a reconcile.
STATS_TIMEOUT = urllib3.Timeout(connect=2.0, read=10.0)
ENDPOINT_SECONDS = 600.0


class Kubelets(Connection):
    """Reads from the nodes' kubelets, on the port's client (its CA, credentials and connection pool)."""

    def __init__(self, api: client.ApiClient | None = None) -> None:
        super().__init__(api)
        self._endpoints: dict[str, tuple[float, tuple[str, int] | None]] = {}  # node -> (read at, endpoint)

    @threaded
    def stats_summary(self, node: str) -> dict[str, Any] | None:
        """The node's summary (pods, their volumes), or None when the Node reports no kubelet endpoint."""
        endpoint = self._kubelet_endpoint(node)
        if endpoint is None:
            return None
        address, port = endpoint
        host = f"[{address}]" if ":" in address else address
        headers = {"Accept": "application/json"}
        for setting in self.client.configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        response = self.client.rest_client.pool_manager.request(
            "GET",
            f"https://{host}:{port}/stats/summary",
            headers=headers,
            timeout=STATS_TIMEOUT,
            retries=False,
        )
        if response.status != 200:
            raise OSError(f"kubelet of {node} answered {response.status}: {response.data[:200]!r}")
        summary: dict[str, Any] = json.loads(response.data)
        return summary

    def _kubelet_endpoint(self, node: str) -> tuple[str, int] | None:
        """From the Node, read once per ENDPOINT_SECONDS (a node keeps its address): an idle operator's
        resyncs ask the API server nothing."""
        known = self._endpoints.get(node)
        if known is not None and time.monotonic() - known[0] < ENDPOINT_SECONDS:
            return known[1]
        endpoint = kubelet_endpoint(self.get(f"/api/v1/nodes/{node}"))
        self._endpoints[node] = (time.monotonic(), endpoint)
        return endpoint
