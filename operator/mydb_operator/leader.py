"""Leader election on a coordination.k8s.io Lease: of several instances, exactly one reconciles.

The leader renews the Lease every duration/3. A standby takes the Lease once it
has not been renewed for a whole duration. A leader that cannot renew in time
exits at once (its Deployment restarts it as a standby), so two leaders never
overlap by more than the clock skew between them.

A Lease only keeps apart the instances that name the same Lease. So each Lease
also carries the scope its holder manages (all namespaces, or its -n list),
and an instance refuses to start while another live Lease, held by someone
else, guards a scope that overlaps its own: two installs of the chart, or a
local run beside the in-cluster Deployment, must not both act on one database.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import http.server
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import api

log = logging.getLogger(__name__)
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
ALL_NAMESPACES = "*"
GLOB_CHARACTERS = "*?["
# What a failed call to the API server raises: urllib3's errors (connection
# refused, timeout) reach the caller unwrapped by the kubernetes client.
API_ERRORS = (ApiException, OSError, urllib3.exceptions.HTTPError)


class ScopeConflict(Exception):
    """Another live operator instance manages namespaces this one would manage too."""


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


# ---------------------------------------------------------------- where the Lease lives

def choose_lease_namespace(pod_namespace: str | None, service_account_namespace: str | None,
                           kubeconfig_namespace: str | None) -> str:
    """The first namespace that says where this instance runs; "default" exists in every cluster."""
    return pod_namespace or service_account_namespace or kubeconfig_namespace or "default"


def default_namespace() -> str:
    """POD_NAMESPACE, else the pod's service-account namespace, else the current kubeconfig context's."""
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as file:
            service_account_namespace: str | None = file.read().strip()
    except OSError:
        service_account_namespace = None
    pod_namespace = os.environ.get("POD_NAMESPACE")
    return choose_lease_namespace(pod_namespace, service_account_namespace,
                                  None if pod_namespace or service_account_namespace else kubeconfig_namespace())


def kubeconfig_namespace() -> str | None:
    import kubernetes

    try:
        _, current = kubernetes.config.list_kube_config_contexts()
    except (kubernetes.config.ConfigException, OSError, ValueError):
        return None
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


# ---------------------------------------------------------------- scopes

def scope_of(namespaces: Sequence[str]) -> str:
    """The scope written on the Lease: "*" for all namespaces, else the sorted namespace globs, comma-separated.

    Each -n value is a kopf pattern ("team-*", "a, !a-test", "!kube-*"). Only its
    inclusive globs count: an exclusion only narrows a scope, so ignoring it keeps
    the check conservative. A pattern that starts with an exclusion means every
    namespace but some, hence all namespaces here."""
    globs: set[str] = set()
    for pattern in namespaces:
        parts = [part.strip() for part in pattern.split(",") if part.strip()]
        if not parts or parts[0].startswith("!"):
            return ALL_NAMESPACES
        globs.update(part for part in parts if not part.startswith("!"))
    if not globs or ALL_NAMESPACES in globs:
        return ALL_NAMESPACES
    return ",".join(sorted(globs))


def parse_scope(text: str | None) -> frozenset[str]:
    """The globs of a scope annotation; a missing or empty one counts as all namespaces (conservative)."""
    globs = frozenset(part.strip() for part in (text or "").split(",") if part.strip())
    if not globs or ALL_NAMESPACES in globs:
        return frozenset({ALL_NAMESPACES})
    return globs


def _literal_head(glob: str) -> str:
    cut = min((glob.index(c) for c in GLOB_CHARACTERS if c in glob), default=len(glob))
    return glob[:cut]


def _literal_tail(glob: str) -> str:
    cut = max((glob.rindex(c) for c in GLOB_CHARACTERS + "]" if c in glob), default=-1)
    return glob[cut + 1:]


def globs_overlap(first: str, second: str) -> bool:
    """Whether some namespace name may match both globs.

    A name (or a glob) that the other glob matches overlaps it. Two globs that do
    not match each other overlap unless their literal starts or ends disagree
    ("team-a-*" and "team-b-*" never meet); otherwise they are taken to overlap,
    which may refuse a pair that could have run together, never the reverse."""
    if fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first):
        return True
    if not (any(c in first for c in GLOB_CHARACTERS) and any(c in second for c in GLOB_CHARACTERS)):
        return False  # a plain name that the other side does not match
    heads, tails = (_literal_head(first), _literal_head(second)), (_literal_tail(first), _literal_tail(second))
    heads_agree = heads[0].startswith(heads[1]) or heads[1].startswith(heads[0])
    tails_agree = tails[0].endswith(tails[1]) or tails[1].endswith(tails[0])
    return heads_agree and tails_agree


def scopes_overlap(first: str, second: str) -> bool:
    """Whether two scopes ("*" or "a,b") may share a namespace; "*" overlaps every scope."""
    return any(globs_overlap(a, b) for a in parse_scope(first) for b in parse_scope(second))


def describe_scope(scope: str) -> str:
    globs = parse_scope(scope)
    if globs == {ALL_NAMESPACES}:
        return "all namespaces"
    return "namespace" + ("s " if len(globs) > 1 else " ") + ", ".join(sorted(globs))


# ---------------------------------------------------------------- other instances' Leases

@dataclass(frozen=True)
class LeaseView:
    """What the overlap check needs to know of one operator Lease."""

    namespace: str
    name: str
    holder: str | None
    renewed: datetime.datetime | None
    duration: int
    scope: str

    def live(self, now: datetime.datetime) -> bool:
        """Held and renewed within its duration: its holder may be acting right now."""
        if not self.holder or self.renewed is None:
            return False
        return self.renewed + datetime.timedelta(seconds=self.duration) >= now


def lease_view(lease: client.V1Lease) -> LeaseView:
    metadata = lease.metadata or client.V1ObjectMeta()
    spec = lease.spec or client.V1LeaseSpec()
    return LeaseView(namespace=metadata.namespace or "", name=metadata.name or "",
                     holder=spec.holder_identity or None, renewed=spec.renew_time,
                     duration=spec.lease_duration_seconds or 0,
                     scope=(metadata.annotations or {}).get(api.OPERATOR_SCOPE_ANNOTATION) or ALL_NAMESPACES)


def expired(lease: client.V1Lease, now: datetime.datetime) -> bool:
    """A Lease nobody renewed for its whole duration is free to take."""
    return not lease_view(lease).live(now)


def conflicting_lease(leases: Iterable[LeaseView], *, namespace: str, name: str, identity: str, scope: str,
                      now: datetime.datetime) -> LeaseView | None:
    """Another live Lease, held by someone else, whose scope overlaps ours; None when there is none.

    Our own Lease never conflicts: whoever holds it, we stand by for it."""
    for lease in sorted(leases, key=lambda lease: (lease.namespace, lease.name)):
        if (lease.namespace, lease.name) == (namespace, name) or lease.holder == identity:
            continue
        if lease.live(now) and scopes_overlap(lease.scope, scope):
            return lease
    return None


def conflict_message(theirs: LeaseView, *, namespace: str, name: str, scope: str, now: datetime.datetime) -> str:
    renewed = f"{(now - theirs.renewed).total_seconds():.0f}s ago" if theirs.renewed else "recently"
    return (
        f"mydb-operator: refusing to start: another mydb-operator instance, {theirs.holder}, holds the Lease "
        f"{theirs.namespace}/{theirs.name} (renewed {renewed}, lease {theirs.duration}s) and manages "
        f"{describe_scope(theirs.scope)}, which overlaps this instance's {describe_scope(scope)}; two operators "
        f"acting on the same databases at once undo each other's work. Either stop that instance; or run this "
        f"one with -n for namespaces the other does not manage; or, to run this one as its standby, point it at "
        f"the same Lease with --leader-lease-namespace {theirs.namespace} --leader-lease-name {theirs.name} "
        f"(this instance's Lease is {namespace}/{name}). A Lease that is no longer renewed stops counting "
        f"{theirs.duration}s after its last renewal."
    )


# ---------------------------------------------------------------- the election

class LeaderLease:
    def __init__(self, name: str, namespace: str, identity: str, duration: int = 15,
                 scope: str = ALL_NAMESPACES):
        self.name, self.namespace, self.identity, self.duration = name, namespace, identity, duration
        self.scope = scope
        self.holder: str | None = None  # as last read: the standby says whom it waits for
        self.api = client.CoordinationV1Api()
        # A hung call must not stall the renewal past the Lease's duration.
        self.request_timeout = max(2.0, duration / 3)
        self._warned_unchecked = False

    def _spec(self, acquired: datetime.datetime | None) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=self.duration,
                                  acquire_time=acquired or now, renew_time=now)

    def _marked(self, metadata: client.V1ObjectMeta) -> client.V1ObjectMeta:
        """Label the Lease as an operator's and write our scope on it, for the other instances' check."""
        metadata.labels = {**(metadata.labels or {}), api.OPERATOR_LEASE_LABEL: "true"}
        metadata.annotations = {**(metadata.annotations or {}), api.OPERATOR_SCOPE_ANNOTATION: self.scope}
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
        lease.metadata = self._marked(lease.metadata)
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
        log.info("waiting to lead (Lease %s/%s, identity %s, scope %s)", self.namespace, self.name, self.identity,
                 self.scope)
        seen: str | None = None
        while not self._attempt():
            if self.holder and self.holder != seen:
                log.info("%s", self.standby_status())
            seen = self.holder
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
        except API_ERRORS as error:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, getattr(error, "reason", error))
            return False

    def refuse_overlap(self, retry_every: float = 2.0) -> None:
        """Raise ScopeConflict if another live operator Lease, held by someone else, overlaps our scope."""
        leases = self._operator_leases(retry_every)
        if leases is None:
            return
        now = _now()
        theirs = conflicting_lease(leases, namespace=self.namespace, name=self.name, identity=self.identity,
                                   scope=self.scope, now=now)
        if theirs is not None:
            raise ScopeConflict(conflict_message(theirs, namespace=self.namespace, name=self.name,
                                                 scope=self.scope, now=now))

    def _operator_leases(self, retry_every: float) -> list[LeaseView] | None:
        """Every operator Lease in the cluster; None when listing them cluster-wide is forbidden."""
        while True:
            try:
                listed = self.api.list_lease_for_all_namespaces(label_selector=f"{api.OPERATOR_LEASE_LABEL}=true",
                                                                _request_timeout=self.request_timeout)
                return [lease_view(lease) for lease in listed.items]
            except ApiException as error:
                if error.status == 403:
                    if not self._warned_unchecked:
                        log.warning("may not list Leases cluster-wide (forbidden): whether another mydb-operator "
                                    "instance manages the same namespaces cannot be checked; grant `list` on "
                                    "leases.coordination.k8s.io cluster-wide (the operator chart does)")
                        self._warned_unchecked = True
                    return None
                log.warning("listing the operator Leases: %s", error.reason)
            except API_ERRORS as error:
                log.warning("listing the operator Leases: %s", error)
            time.sleep(retry_every)

    def release(self) -> None:
        """On a clean stop, hand the Lease over at once instead of after its duration."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.request_timeout)
            if lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease,
                                                  _request_timeout=self.request_timeout)
                log.info("released the Lease %s/%s", self.namespace, self.name)
        except API_ERRORS as error:
            log.warning("could not release the Lease %s/%s: %s", self.namespace, self.name,
                        getattr(error, "reason", error))

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background; call on_lost when the Lease could not be renewed within its duration."""
        def renew() -> None:
            last = time.monotonic()
            while True:
                time.sleep(self.duration / 3)
                started = time.monotonic()  # the API server's renewTime is later than this
                if self._attempt():
                    last = started
                elif time.monotonic() - last >= self.duration:
                    log.error("lost the Lease %s/%s: stopping so a standby can lead", self.namespace, self.name)
                    on_lost()
                    return
        thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        thread.start()
        return thread


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


# ---------------------------------------------------------------- /healthz while standing by

class _StandbyServer(http.server.ThreadingHTTPServer):
    status: Callable[[], str]


class _Healthy(http.server.BaseHTTPRequestHandler):
    server: _StandbyServer

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        if self.path != "/healthz":
            self.send_response(404)
            self.end_headers()
            return
        body = (self.server.status() + "\n").encode()
        self.send_response(200)  # a standby is healthy: the liveness probe must pass
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:  # probes every few seconds: not worth a log line
        pass


@contextlib.contextmanager
def standby_health(port: int, status: Callable[[], str]) -> Iterator[None]:
    """Answer /healthz with `status()` while waiting to lead, so a standby passes its liveness probe."""
    if not port:
        yield
        return
    server = _StandbyServer(("0.0.0.0", port), _Healthy)
    server.status = status
    thread = threading.Thread(target=server.serve_forever, name="standby-health", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()  # kopf's own liveness endpoint takes the port next
