"""The Kubernetes API as a port: the reads and writes a reconcile (and a deletion) makes, as one object.

`ApiPort` says what the reconcile path may ask of the API; `KubernetesApi` is the
adapter that asks the real API server, by URL path through one ApiClient
(cluster/clients.py: no generated API classes). The handlers' Runtime carries
it (reconcile/runtime.py, `Runtime.api`) as it carries Helm: the reconcile
steps call `runtime.api.<method>`, and the unit tests hand it an in-memory fake
(tests/unit/fake_api.py). The informers and the Lease take connections of their
own from the same object (`KubernetesApi.dedicated()`).

What a failed call raises, and which failures mean "refused" rather than
"unreachable": cluster/failures.py, the one classification."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..model.observation import Observation
from .kubelets import Kubelets
from .reads import Reads
from .writes import Writes


class ApiPort(Protocol):
    """The API as a reconcile sees it. Each call is one request (orphan_statefulset and delete_claims: a few);
    each raises one of cluster/failures.API_FAILURES when the API refuses or cannot be reached."""

    # reads
    async def observation(self, namespace: str, release: str) -> Observation:
        """One database's objects, read now: five label-selected lists and three reads by name."""
        ...

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def storage_class(self, name: str) -> dict[str, Any] | None: ...

    async def default_storage_class(self) -> dict[str, Any] | None: ...

    async def read_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def read_cronjob(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]: ...

    async def claim_exists(self, namespace: str, name: str) -> bool: ...

    async def read_database(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def namespace_terminating(self, namespace: str) -> bool:
        """Whether the namespace is being deleted or gone; False when the operator may not read it."""
        ...

    async def terminating_namespaces(self) -> list[str]: ...

    async def list_databases(self, namespace: str) -> list[dict[str, Any]]: ...

    async def stats_summary(self, node: str) -> dict[str, Any] | None:
        """The node's kubelet summary (cluster/kubelets.py): a Node read, then one request to the kubelet."""
        ...

    # writes
    async def create_secret_once(self, body: dict[str, Any]) -> bool:
        """True when created now, False when it was there (never overwritten)."""
        ...

    async def write_secret(self, body: dict[str, Any], replacing: dict[str, Any] | None) -> None:
        """Create the Secret (REPLACING None), or replace REPLACING, the operator's own as it was read (its
        certificates only); a Secret made or changed since is refused (409), never overwritten."""
        ...

    async def update_secret_data(self, secret: dict[str, Any], changes: dict[str, str | None]) -> None:
        """Replace SECRET as read with these keys set (None: removed); a change made since it was read: 409."""
        ...

    async def create_job_once(self, body: dict[str, Any]) -> bool: ...

    async def label_pod(self, namespace: str, name: str, key: str, value: str) -> None: ...

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...

    async def grow_claim(self, namespace: str, name: str, size: str) -> None: ...

    async def orphan_statefulset(self, namespace: str, name: str) -> None:
        """Delete the StatefulSet but not its pods, and wait until it is gone (TimeoutError if it stays)."""
        ...

    async def delete_statefulset(self, namespace: str, name: str) -> None: ...

    async def delete_claims(self, namespace: str, release: str) -> list[str]: ...

    async def delete_release_records(self, namespace: str, release: str) -> None: ...

    async def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete the Secret (gone already: nothing); with UID, only that very object (a precondition)."""
        ...

    async def write_record(self, body: dict[str, Any]) -> str:
        """Create or replace (compare-and-swap) the record of the primary; its new resourceVersion."""
        ...

    async def delete_record(self, namespace: str, release: str) -> None:
        """Delete the record of the primary and the primary lease of the same name."""
        ...

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def write_lease(self, body: dict[str, Any]) -> str:
        """Create or replace (compare-and-swap on its resourceVersion) the primary lease; its new resourceVersion."""
        ...

    async def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None) -> None: ...

    async def remove_annotation(self, namespace: str, name: str, key: str, value: str) -> None: ...

    async def release_finalizer(self, namespace: str, name: str, resource_version: str, finalizers: list[str]) -> None:
        """Set the MyDatabase's finalizers if it is still at that resourceVersion (else nothing)."""
        ...


class KubernetesApi(Reads, Writes, Kubelets):
    """The port on the real API server: one ApiClient, made on first use (cluster/clients.Connection),
    the reads of cluster/reads.py, the writes of cluster/writes.py and the kubelets' summaries."""


if TYPE_CHECKING:  # mypy checks here that the adapter offers every call of the port, as declared
    _adapter: type[ApiPort] = KubernetesApi
