"""The election itself: take, renew and release the Lease; refuse to start beside an overlapping instance."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .. import names
from ..cluster.failures import API_FAILURES
from .conflicts import LeaseView, ScopeConflict, conflict_message, conflicting_lease, expired, lease_view
from .scopes import ALL_NAMESPACES

log = logging.getLogger(__name__)


class LeaderLease:
    def __init__(self, namespace: str, name: str, identity: str, duration: int = 15, scope: str = ALL_NAMESPACES):
        self.namespace, self.name, self.identity, self.duration = namespace, name, identity, duration
        self.scope = scope
        self.holder: str | None = None  # as last read: the standby says whom it waits for
        api_client = client.ApiClient()
        api_client.user_agent = names.USER_AGENT
        self.api = client.CoordinationV1Api(api_client)
        # A hung call must not stall the renewal past the Lease's duration.
        self.request_timeout = max(2.0, duration / 3)
        self._warned_unchecked = False
        # Held across a renewal and the release: a renewal after the release would take the Lease back.
        self._renewing = threading.Lock()
        self._released = False

    def _spec(self, acquired: datetime.datetime | None) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=self.duration,
            acquire_time=acquired or now,
            renew_time=now,
        )

    def _marked(self, metadata: client.V1ObjectMeta) -> client.V1ObjectMeta:
        """Label the Lease as an operator's and write our scope on it, for the other instances' check."""
        metadata.labels = {**(metadata.labels or {}), names.OPERATOR_LEASE_LABEL: "true"}
        metadata.annotations = {**(metadata.annotations or {}), names.OPERATOR_SCOPE_ANNOTATION: self.scope}
        return metadata

    def try_acquire(self) -> bool:
        """One attempt: take the Lease if it is free, expired or already ours."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.request_timeout)
        except ApiException as error:
            if error.status != 404:
                raise
            body = client.V1Lease(metadata=self._marked(client.V1ObjectMeta(name=self.name)), spec=self._spec(None))
            try:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.request_timeout)
            except ApiException as conflict:
                if conflict.status == 409:  # another replica created it first
                    return False
                raise
            self.holder = self.identity
            return True
        spec = lease.spec or client.V1LeaseSpec()
        self.holder = spec.holder_identity or None
        if spec.holder_identity != self.identity and not expired(lease, _now()):
            return False
        ours = spec.holder_identity == self.identity
        lease.spec = self._spec(spec.acquire_time if ours else None)
        lease.metadata = self._marked(lease.metadata or client.V1ObjectMeta(name=self.name))
        try:
            # The resourceVersion in `lease` makes this a compare-and-swap.
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.request_timeout)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.holder = self.identity
        return True

    def acquire(self, retry_every: float = 2.0) -> None:
        """Block until this instance leads; log each new holder meanwhile."""
        log.info(
            "waiting to lead (Lease %s/%s, identity %s, scope %s)", self.namespace, self.name, self.identity, self.scope
        )
        last_logged_holder: str | None = None
        while not self._attempt():
            if self.holder and self.holder != last_logged_holder:
                log.info("%s", self.standby_status())
            last_logged_holder = self.holder
            time.sleep(retry_every)
        log.info("became the leader (Lease %s/%s, identity %s)", self.namespace, self.name, self.identity)

    def standby_status(self) -> str:
        """What a standby answers on /healthz and logs: for whom it stands by."""
        if self.holder and self.holder != self.identity:
            return f"standby: Lease {self.namespace}/{self.name} held by {self.holder}"
        return f"standby: waiting for Lease {self.namespace}/{self.name}"

    def _attempt(self) -> bool:
        try:
            return self.try_acquire()
        except API_FAILURES as error:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, getattr(error, "reason", error))
            return False

    def refuse_overlap(self, retry_every: float = 2.0) -> None:
        """Raise ScopeConflict if another live operator Lease, held by someone else, overlaps our scope."""
        leases = self._operator_leases(retry_every)
        if leases is None:
            return
        now = _now()
        theirs = conflicting_lease(
            leases, namespace=self.namespace, name=self.name, identity=self.identity, scope=self.scope, now=now
        )
        if theirs is not None:
            raise ScopeConflict(
                conflict_message(theirs, namespace=self.namespace, name=self.name, scope=self.scope, now=now)
            )

    def _operator_leases(self, retry_every: float) -> list[LeaseView] | None:
        """Every operator Lease in the cluster; None when listing them cluster-wide is forbidden."""
        while True:
            try:
                listed = self.api.list_lease_for_all_namespaces(
                    label_selector=f"{names.OPERATOR_LEASE_LABEL}=true", _request_timeout=self.request_timeout
                )
                return [lease_view(lease) for lease in listed.items]
            except ApiException as error:
                if error.status == 403:
                    if not self._warned_unchecked:
                        log.warning(
                            "may not list Leases cluster-wide (forbidden): whether another mydb-operator "
                            "instance manages the same namespaces cannot be checked; grant `list` on "
                            "leases.coordination.k8s.io cluster-wide (the operator chart does)"
                        )
                        self._warned_unchecked = True
                    return None
                log.warning("listing the operator Leases: %s", error.reason)
            except API_FAILURES as error:
                log.warning("listing the operator Leases: %s", error)
            time.sleep(retry_every)

    def release(self) -> None:
        """On a clean stop, hand the Lease over at once instead of after its duration."""
        with self._renewing:
            self._released = True
            self._hand_over()

    def _hand_over(self) -> None:
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.request_timeout)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, lease, _request_timeout=self.request_timeout
                )
                log.info("released the Lease %s/%s", self.namespace, self.name)
        except API_FAILURES as error:
            log.warning(
                "could not release the Lease %s/%s: %s", self.namespace, self.name, getattr(error, "reason", error)
            )

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background; call on_lost when the Lease could not be renewed within its duration."""

        def renew() -> None:
            last = time.monotonic()
            while True:
                time.sleep(self.duration / 3)
                started = time.monotonic()  # the API server's renewTime is later than this
                with self._renewing:
                    if self._released:
                        return
                    renewed = self._attempt()
                if renewed:
                    last = started
                elif time.monotonic() - last >= self.duration:
                    log.error("lost the Lease %s/%s: stopping so a standby can lead", self.namespace, self.name)
                    on_lost()
                    return

        thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        thread.start()
        return thread


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
