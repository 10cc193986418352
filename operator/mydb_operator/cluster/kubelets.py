"""The kubelets' summary API: how full each volume on a node is.

The operator asks a node's kubelet itself, at https://<InternalIP>:<kubelet port>/stats/summary, as
metrics-server does, with the credentials it uses for the API server. The kubelet authorizes that path
as `nodes/stats` get: a narrower right than the API server's node proxy (`nodes/proxy` reaches every
kubelet endpoint, exec included). The kubelet's serving certificate is verified with the API server's
CA (the connection pool of the operator's client); a kubelet whose certificate that CA did not sign
gives no figures, and the status says the usage is unknown."""

from __future__ import annotations

import json
from typing import Any

from ..model.volumes import kubelet_endpoint
from .blocking import threaded
from .clients import Connection

STATS_TIMEOUT = (2.0, 10.0)  # connect, read: a node that does not answer must not hold a reconcile


class Kubelets(Connection):
    """Reads from the nodes' kubelets, on the port's client (its CA, credentials and connection pool)."""

    @threaded
    def stats_summary(self, node: str) -> dict[str, Any] | None:
        """The node's summary (pods, their volumes), or None when the Node reports no kubelet endpoint."""
        endpoint = kubelet_endpoint(self.get(f"/api/v1/nodes/{node}"))
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
