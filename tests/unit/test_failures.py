"""failure_reason and failure_detail: what a log line and a metric say of a failed API call."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from mydb_operator.cluster.failures import failure_detail, failure_reason


def refusal(status: int, reason: str, body: str | None) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = body
    return error


QUOTA = "persistentvolumeclaims \"data-db-0\" is forbidden: exceeded quota: storage, requested: requests.storage=1Gi"


def test_a_refusal_is_told_by_the_api_servers_own_message() -> None:
    error = refusal(403, "Forbidden", json.dumps({"kind": "Status", "reason": "Forbidden", "message": QUOTA}))
    assert (failure_reason(error), failure_detail(error)) == ("Api403", QUOTA)


@pytest.mark.parametrize("body", [None, "", "<html>bad gateway</html>", "[1, 2]", json.dumps({"message": 7})])
def test_without_a_status_message_the_reason_phrase_is_told(body: str | None) -> None:
    assert failure_detail(refusal(502, "Bad Gateway", body)) == "Bad Gateway"
    assert failure_detail(refusal(500, "", body)) == "status 500"


def test_an_unreachable_server_is_told_by_what_refused_the_connection() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    error = urllib3.exceptions.MaxRetryError(pool=None, url="/api", reason=refused)  # type: ignore[arg-type]
    assert failure_reason(error) == "ApiUnreachable"
    assert failure_detail(error) == "[Errno 111] Connection refused"
    assert failure_detail(OSError()) == "OSError"
