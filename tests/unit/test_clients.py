"""clients.request/get/send over real HTTP: a small server on loopback stands in for the API server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mydb_operator import names
from mydb_operator.cluster import clients
from mydb_operator.cluster.blocking import created, exists

Seen = list[dict[str, Any]]


def handler_for(answers: dict[tuple[str, str], tuple[int, dict[str, Any]]], seen: Seen) -> type:
    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?")[0]
            seen.append({"method": self.command, "url": self.path, "headers": self.headers, "body": body})
            status, payload = answers.get((self.command, path), (404, {"kind": "Status", "code": 404}))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer  # noqa: N815 (http.server's names)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def api_server() -> Iterator[tuple[dict[tuple[str, str], tuple[int, dict[str, Any]]], Seen, client.ApiClient]]:
    answers: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    seen: Seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(answers, seen))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    configuration.api_key = {"BearerToken": "Bearer secret-token"}  # as load_incluster_config sets it
    api = client.ApiClient(configuration)
    api.user_agent = names.USER_AGENT
    yield answers, seen, api
    server.shutdown()
    api.close()


def test_a_read_is_plain_json_with_the_operators_name_and_credentials(api_server: Any) -> None:
    answers, seen, api = api_server
    answers[("GET", "/api/v1/namespaces/ns/pods")] = (200, {"items": [{"metadata": {"name": "db-0"}}]})
    response = clients.request("GET", "/api/v1/namespaces/ns/pods", query={"labelSelector": "a=b,c", "watch": True},
                               api=api)
    assert json.loads(response.data) == {"items": [{"metadata": {"name": "db-0"}}]}
    request = seen[0]
    assert request["url"] == "/api/v1/namespaces/ns/pods?labelSelector=a%3Db%2Cc&watch=true"
    assert request["headers"]["User-Agent"] == names.USER_AGENT
    assert request["headers"]["Authorization"] == "Bearer secret-token"
    assert "Content-Type" not in request["headers"]  # no body, nothing to describe


def test_a_write_sends_json_with_its_content_type(api_server: Any) -> None:
    answers, seen, api = api_server
    answers[("PATCH", "/api/v1/namespaces/ns/pods/db-0")] = (200, {})
    clients.request("PATCH", "/api/v1/namespaces/ns/pods/db-0", body={"metadata": {"labels": {"role": "primary"}}},
                    content_type=clients.MERGE_PATCH, api=api)
    assert seen[0]["headers"]["Content-Type"] == clients.MERGE_PATCH
    assert json.loads(seen[0]["body"]) == {"metadata": {"labels": {"role": "primary"}}}


def test_a_refusal_raises_with_its_status_and_body(api_server: Any) -> None:
    answers, _, api = api_server
    answers[("POST", "/api/v1/namespaces/ns/secrets")] = (409, {"kind": "Status", "reason": "AlreadyExists"})
    with pytest.raises(ApiException) as refused:
        clients.request("POST", "/api/v1/namespaces/ns/secrets", body={}, api=api)
    assert refused.value.status == 409
    assert "AlreadyExists" in refused.value.body
    # what the writes build on: 409 means "already there", 404 "not there"
    assert created(lambda: clients.request("POST", "/api/v1/namespaces/ns/secrets", body={}, api=api)) is False
    assert exists(lambda: clients.request("GET", "/api/v1/namespaces/ns/secrets/gone", api=api)) is False
