"""What a failed call to the API server raises, and the short reason logs and metrics give it."""

from __future__ import annotations

import urllib3
from kubernetes.client.exceptions import ApiException

# The API refused, or could not be reached (it restarts, the network drops): urllib3's
# errors reach the caller unwrapped by the kubernetes client.
API_FAILURES = (ApiException, urllib3.exceptions.HTTPError, OSError)


def failure_reason(error: BaseException) -> str:
    """ "Api409" for a refusal with its status, "ApiUnreachable" for anything else."""
    return f"Api{error.status}" if isinstance(error, ApiException) else "ApiUnreachable"


def failure_detail(error: BaseException) -> str:
    """The API's reason phrase, else the error's type."""
    return getattr(error, "reason", None) or type(error).__name__
