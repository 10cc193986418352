"""Where each kind the operator touches lives in the API: its URL paths. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .. import names


@dataclass(frozen=True)
class Resource:
    """One resource type: its group/version ("v1" is the core group) and plural name."""

    group_version: str
    plural: str

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection (in a namespace, or across all when None), or of one object."""
        if subresource is not None and name is None:
            raise ValueError(f"{self.plural}: a subresource ({subresource}) belongs to one object: give its name")
        root = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        scope = f"/namespaces/{namespace}" if namespace is not None else ""
        path = f"{root}{scope}/{self.plural}"
        if name is not None:
            path += f"/{name}"
            if subresource is not None:
                path += f"/{subresource}"
        return path


PODS = Resource("v1", "pods")
SERVICES = Resource("v1", "services")
CLAIMS = Resource("v1", "persistentvolumeclaims")
SECRETS = Resource("v1", "secrets")
CONFIG_MAPS = Resource("v1", "configmaps")
STATEFULSETS = Resource("apps/v1", "statefulsets")
CRONJOBS = Resource("batch/v1", "cronjobs")
JOBS = Resource("batch/v1", "jobs")
STORAGE_CLASSES = Resource("storage.k8s.io/v1", "storageclasses")
ENDPOINT_SLICES = Resource("discovery.k8s.io/v1", "endpointslices")
LEASES = Resource("coordination.k8s.io/v1", "leases")
NAMESPACES = Resource("v1", "namespaces")
LEASES = Resource("coordination.k8s.io/v1", "leases")  # the leader election's
DATABASES = Resource(f"{names.GROUP}/{names.VERSION}", names.PLURAL)
