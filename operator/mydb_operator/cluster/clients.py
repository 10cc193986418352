"""The Kubernetes API client, and the calls the operator makes through it, by URL path.

A client per call costs a TLS handshake and leaves a connection pool behind
(memory grew with every reconcile); one client reuses its connections.

The calls go through the client's ApiClient (its configuration, credentials
and connection pool) but not its generated API classes: those import a
pydantic model class for every kind they name (CoreV1Api alone 251; the
four the operator used cost about 30 MB of PSS, docs/benchmarks.md round 8) and
validate every argument, while the operator only ever wanted the API's JSON."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .. import names

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
Timeout = float | tuple[float, float] | None


def new_client(configuration: client.Configuration | None = None) -> client.ApiClient:
    """A client with its own connection pool; without a configuration, a copy of the loaded one."""
    api = client.ApiClient(configuration)
    api.user_agent = names.USER_AGENT
    return api


def request(
    method: str,
    path: str,
    *,
    api: client.ApiClient,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str = JSON,
    timeout: Timeout = None,
) -> urllib3.BaseHTTPResponse:
    """The response, unread (a watch is read as a stream); an ApiException when the API refused."""
    headers = {"Accept": JSON} if body is None else {"Accept": JSON, "Content-Type": content_type}
    serialized = api.param_serialize(
        method,
        path,
        query_params=list((query or {}).items()),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*serialized, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        response.read()
        raise ApiException(http_resp=response)
    raw: urllib3.BaseHTTPResponse = response.response
    return raw


class Connection:
    """One ApiClient (its configuration, credentials and connection pool) and the three shapes of
    request the operator makes through it. The client is made on first use, after the operator has
    loaded its kubeconfig or in-cluster config; one client reuses its connections."""

    def __init__(self, api: client.ApiClient | None = None) -> None:
        self._client = api
        self._making = threading.Lock()  # first uses may come from several worker threads at once

    @property
    def client(self) -> client.ApiClient:
        made = self._client
        if made is None:
            with self._making:
                if self._client is None:
                    self._client = new_client()
                made = self._client
        return made

    def dedicated(self) -> Connection:
        """A connection of its own, as each informer (a watch holds a connection for minutes) and the
        Lease have: the same configuration, another client and connection pool."""
        configuration = copy.deepcopy(self._client.configuration) if self._client is not None else None
        return Connection(new_client(configuration))

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: Timeout = None,
    ) -> urllib3.BaseHTTPResponse:
        return request(
            method, path, api=self.client, query=query, body=body, content_type=content_type, timeout=timeout
        )

    def get(self, path: str, *, timeout: Timeout = None, **query: Any) -> dict[str, Any]:
        """The API's JSON as plain dicts."""
        body: dict[str, Any] = json.loads(self.request("GET", path, query=query, timeout=timeout).data)
        return body

    def exchange(
        self, method: str, path: str, body: Any, *, content_type: str = JSON, timeout: Timeout = None
    ) -> dict[str, Any]:
        """A write whose answer (the object as stored: its new resourceVersion) is used."""
        answer: dict[str, Any] = json.loads(
            self.request(method, path, body=body, content_type=content_type, timeout=timeout).data
        )
        return answer

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        timeout: Timeout = None,
        **query: Any,
    ) -> None:
        """A write whose answer is not used: the body is drained, so the connection goes back
        to the pool, but never parsed."""
        _ = self.request(method, path, query=query, body=body, content_type=content_type, timeout=timeout).data


def load_config() -> None:
    """In a pod, its ServiceAccount; elsewhere the kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
