"""What a failed call to the API server raises, and the short reason logs and metrics give it."""

from __future__ import annotations

import json

import urllib3
from kubernetes.client.exceptions import ApiException

# The API refused, or could not be reached (it restarts, the network drops): urllib3's
# errors reach the caller unwrapped by the kubernetes client.
API_FAILURES = (ApiException, urllib3.exceptions.HTTPError, OSError)


def refused(error: BaseException) -> bool:
    """The API server answered no (4xx: forbidden by quota or policy, invalid): asking again will
    not help until something changes, unlike an unreachable or failing server."""
    return isinstance(error, ApiException) and 400 <= (error.status or 0) < 500


def conflict(error: BaseException) -> bool:
    """The API refused a write made over an older resourceVersion (409): read again, then write."""
    return isinstance(error, ApiException) and error.status == 409


def failure_reason(error: BaseException) -> str:
    """ "Api409" for a refusal with its status, "ApiUnreachable" for anything else."""
    return f"Api{error.status}" if isinstance(error, ApiException) else "ApiUnreachable"


def failure_detail(error: BaseException) -> str:
    """What the API server said (its Status message: which quota, which field), else its reason
    phrase; for an unreachable server, urllib3's reason (the refused connection) or the error."""
    if isinstance(error, ApiException):
        return _status_message(error.body) or str(error.reason or f"status {error.status}")
    return str(getattr(error, "reason", None) or error) or type(error).__name__


def _status_message(body: object) -> str:
    try:
        status = json.loads(body) if isinstance(body, (str, bytes)) else None
    except ValueError:
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return message if isinstance(message, str) else ""
