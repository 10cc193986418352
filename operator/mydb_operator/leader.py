"""Leader election on a coordination.k8s.io Lease: of several replicas, exactly one reconciles.

The leader renews the Lease every duration/3. A standby takes the Lease once it
has not been renewed for a whole duration. A leader that cannot renew in time
exits at once (its Deployment restarts it as a standby), so two leaders never
overlap by more than the clock skew between them.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import logging
import os
import socket
import threading
import time
from typing import Callable, Iterator

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def default_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as file:
            return file.read().strip()
    except OSError:
        return "mydb-system"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def expired(lease: client.V1Lease, now: datetime.datetime) -> bool:
    """A Lease nobody renewed for its whole duration is free to take."""
    spec = lease.spec
    if not spec.holder_identity or not spec.renew_time:
        return True
    return spec.renew_time + datetime.timedelta(seconds=spec.lease_duration_seconds or 0) < now


class LeaderLease:
    def __init__(self, name: str, namespace: str, identity: str, duration: int = 15):
        self.name, self.namespace, self.identity, self.duration = name, namespace, identity, duration
        self.api = client.CoordinationV1Api()

    def _spec(self, acquired: datetime.datetime | None) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=self.duration,
                                  acquire_time=acquired or now, renew_time=now)

    def try_acquire(self) -> bool:
        """One attempt: take the Lease if it is free, expired or already ours."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=self._spec(None))
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as conflict:
                if conflict.status == 409:  # another replica created it first
                    return False
                raise
        if lease.spec.holder_identity != self.identity and not expired(lease, _now()):
            return False
        ours = lease.spec.holder_identity == self.identity
        lease.spec = self._spec(lease.spec.acquire_time if ours else None)
        try:
            # The resourceVersion in `lease` makes this a compare-and-swap.
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            return True
        except ApiException as error:
            if error.status == 409:
                return False
            raise

    def acquire(self, retry_every: float = 2.0) -> None:
        """Block until this replica leads."""
        log.info("waiting to lead (Lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
        while not self._attempt():
            time.sleep(retry_every)
        log.info("became the leader (Lease %s/%s, identity %s)", self.namespace, self.name, self.identity)

    def _attempt(self) -> bool:
        try:
            return self.try_acquire()
        except (ApiException, OSError) as error:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, getattr(error, "reason", error))
            return False

    def release(self) -> None:
        """On a clean stop, hand the Lease over at once instead of after its duration."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
                log.info("released the Lease %s/%s", self.namespace, self.name)
        except (ApiException, OSError) as error:
            log.warning("could not release the Lease %s/%s: %s", self.namespace, self.name,
                        getattr(error, "reason", error))

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background; call on_lost when the Lease could not be renewed within its duration."""
        def renew() -> None:
            last = time.monotonic()
            while True:
                time.sleep(self.duration / 3)
                if self._attempt():
                    last = time.monotonic()
                elif time.monotonic() - last >= self.duration:
                    log.error("lost the Lease %s/%s: stopping so a standby can lead", self.namespace, self.name)
                    on_lost()
                    return
        thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        thread.start()
        return thread


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *_: object) -> None:  # probes every few seconds: not worth a log line
        pass


@contextlib.contextmanager
def standby_health(port: int) -> Iterator[None]:
    """Answer /healthz while waiting to lead, so a standby passes its liveness probe."""
    if not port:
        yield
        return
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), _Healthy)
    thread = threading.Thread(target=server.serve_forever, name="standby-health", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()  # kopf's own liveness endpoint takes the port next
