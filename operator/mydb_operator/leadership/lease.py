"""The election itself: take, renew and release the Lease; refuse to start beside an overlapping instance.

The Lease is read and written by URL path on a connection of its own, taken from the
API port's adapter (cluster/clients.Connection, as the informers take theirs): plain
JSON, none of the client's generated classes (clients.py says what they cost)."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import names
from ..cluster.blocking import tolerating
from ..cluster.clients import Connection
from ..cluster.failures import API_FAILURES
from ..cluster.resources import LEASES
from ..model.timestamps import micro_time
from .conflicts import LeaseView, ScopeConflict, conflict_message, conflicting_lease, expired, lease_view
from .scopes import ALL_NAMESPACES

Lease = dict[str, Any]  # a coordination.k8s.io/v1 Lease, as the API's JSON
# A leader that could not renew its Lease for this part of its duration stops acting (the process exits): a
# standby takes the Lease only once the whole duration has passed since the last renewal, so the two never act
# at once; the last third covers a renewal in flight and the exit.
LEAD_FRACTION = 2 / 3
RETRY_SECONDS = 1.0  # a failed renewal is tried again this soon, not a third of the duration later

log = logging.getLogger(__name__)


class LeaderLease:
    def __init__(
        self,
        namespace: str,
        name: str,
        identity: str,
        connection: Connection,
        duration: int = 15,
        scope: str = ALL_NAMESPACES,
    ):
        self.namespace, self.name, self.identity, self.duration = namespace, name, identity, duration
        self.scope = scope
        self.holder: str | None = None  # as last read: the standby says whom it waits for
        self.connection = connection
        self.path = LEASES.path(namespace, name)
        # A hung call must not stall the renewal past the Lease's duration.
        self.request_timeout = max(2.0, duration / 3)
        self._warned_unchecked = False
        # Held across a renewal and the release: a renewal after the release would take the Lease back.
        self._renewing = threading.Lock()
        self._released = False
        # The Lease as our last write stored it: a renewal replaces it by its resourceVersion without reading it
        # first (one request, not two); a conflict means someone else wrote it since, and the next attempt reads.
        self._ours: Lease | None = None

    def _spec(self, acquired: str | None) -> dict[str, Any]:
        now = micro_time(_now())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "acquireTime": acquired or now,
            "renewTime": now,
        }

    def _marked(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Label the Lease as an operator's and write our scope on it, for the other instances' check."""
        metadata["labels"] = {**(metadata.get("labels") or {}), names.OPERATOR_LEASE_LABEL: "true"}
        metadata["annotations"] = {**(metadata.get("annotations") or {}), names.OPERATOR_SCOPE_ANNOTATION: self.scope}
        return metadata

    def _read(self) -> Lease | None:
        """The Lease as stored, or None when there is none."""
        with tolerating(404):
            return self.connection.get(self.path, timeout=self.request_timeout)
        return None

    def _write(self, method: str, path: str, lease: Lease) -> bool:
        """POST or PUT the Lease as ours; False when someone else wrote or created it first (409)."""
        self._ours = None
        with tolerating(409):
            self._ours = self.connection.exchange(method, path, lease, timeout=self.request_timeout)
            self.holder = self.identity
            return True
        return False

    def _renew(self, ours: Lease) -> bool | None:
        """Replace the Lease we last wrote; None when it changed since (409) or is gone (404): read it then."""
        spec = ours.get("spec") or {}
        lease = {**ours, "spec": self._spec(spec.get("acquireTime"))}
        try:
            return self._write("PUT", self.path, lease) or None
        except ApiException as error:
            if error.status != 404:
                raise
            return None

    def try_acquire(self) -> bool:
        """One attempt: take the Lease if it is free, expired or already ours."""
        if self._ours is not None and (renewed := self._renew(self._ours)) is not None:
            return renewed
        lease = self._read()
        if lease is None:  # another replica may create it first
            made = {"metadata": self._marked({"name": self.name}), "spec": self._spec(None)}
            return self._write("POST", LEASES.path(self.namespace), made)
        spec = lease.get("spec") or {}
        self.holder = spec.get("holderIdentity") or None
        if spec.get("holderIdentity") != self.identity and not expired(lease, _now()):
            return False
        ours = spec.get("holderIdentity") == self.identity
        lease["spec"] = self._spec(spec.get("acquireTime") if ours else None)
        lease["metadata"] = self._marked(lease.get("metadata") or {"name": self.name})
        return self._write("PUT", self.path, lease)  # its resourceVersion makes this a compare-and-swap

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
                listed = self.connection.get(
                    LEASES.path(), timeout=self.request_timeout, labelSelector=f"{names.OPERATOR_LEASE_LABEL}=true"
                )
                return [lease_view(lease) for lease in listed["items"]]
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
            except API_FAILURES as error:  # unreachable (an ApiException was answered above)
                log.warning("listing the operator Leases: %s", error)
            time.sleep(retry_every)

    def release(self) -> None:
        """On a clean stop, hand the Lease over at once instead of after its duration."""
        with self._renewing:
            self._released = True
            self._hand_over()

    def _hand_over(self) -> None:
        self._ours = None
        try:
            lease = self.connection.get(self.path, timeout=self.request_timeout)
            spec = lease.get("spec")
            if spec is not None and spec.get("holderIdentity") == self.identity:
                spec.pop("holderIdentity", None)
                spec.pop("renewTime", None)
                self.connection.send("PUT", self.path, lease, timeout=self.request_timeout)
                log.info("released the Lease %s/%s", self.namespace, self.name)
        except API_FAILURES as error:
            log.warning(
                "could not release the Lease %s/%s: %s", self.namespace, self.name, getattr(error, "reason", error)
            )

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background (every third of the duration; a failed attempt again after a second); call
        on_lost once the Lease went unrenewed for LEAD_FRACTION of its duration, before a standby may take it."""

        def renew() -> None:
            deadline = time.monotonic() + self.duration * LEAD_FRACTION
            next_try = time.monotonic() + self.duration / 3
            while True:
                time.sleep(max(0.0, min(next_try, deadline) - time.monotonic()))
                if time.monotonic() < deadline:
                    started = time.monotonic()  # the renewTime written is later than this
                    with self._renewing:
                        if self._released:
                            return
                        renewed = self._attempt()
                    if renewed:
                        deadline = started + self.duration * LEAD_FRACTION
                        next_try = started + self.duration / 3
                    else:
                        next_try = time.monotonic() + RETRY_SECONDS
                if time.monotonic() >= deadline:
                    log.error("lost the Lease %s/%s: stopping so a standby can lead", self.namespace, self.name)
                    on_lost()
                    return

        thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        thread.start()
        return thread


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
