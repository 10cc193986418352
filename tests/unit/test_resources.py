"""The URL paths the operator's API calls go to (cluster/resources.py)."""

from __future__ import annotations

import pytest

from mydb_operator.cluster.resources import CLAIMS, DATABASES, PODS, STATEFULSETS, STORAGE_CLASSES, Resource


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (PODS, {}, "/api/v1/pods"),
        (PODS, {"namespace": "team-a"}, "/api/v1/namespaces/team-a/pods"),
        (PODS, {"namespace": "team-a", "name": "db-0"}, "/api/v1/namespaces/team-a/pods/db-0"),
        (CLAIMS, {"namespace": "ns"}, "/api/v1/namespaces/ns/persistentvolumeclaims"),
        (STATEFULSETS, {"namespace": "ns", "name": "db"}, "/apis/apps/v1/namespaces/ns/statefulsets/db"),
        (STORAGE_CLASSES, {"name": "fast"}, "/apis/storage.k8s.io/v1/storageclasses/fast"),
        (
            DATABASES,
            {"namespace": "ns", "name": "db", "subresource": "status"},
            "/apis/myapp.example.com/v1/namespaces/ns/mydatabases/db/status",
        ),
    ],
)
def test_paths(resource: Resource, args: dict[str, str], path: str) -> None:
    assert resource.path(**args) == path


def test_a_subresource_needs_an_object() -> None:
    with pytest.raises(ValueError, match="give its name"):
        PODS.path("ns", subresource="status")
