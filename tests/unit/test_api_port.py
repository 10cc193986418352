"""The API port (cluster/api.py): the fake the unit tests use offers every call of it, as declared, and
the real adapter makes exactly the requests the operator always made (paths, verbs, how many)."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from fake_api import FakeApi
from test_clients import api_server  # noqa: F401 (the loopback API server fixture)

from kubernetes.client.exceptions import ApiException

from mydb_operator.cluster.api import ApiPort, KubernetesApi
from mydb_operator.cluster.clients import Connection

SELECTOR = "labelSelector=app.kubernetes.io/instance%3Ddb%2Capp.kubernetes.io/name%3Dmydatabase"


def port_calls() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(ApiPort).items()
        if inspect.iscoroutinefunction(member) and not name.startswith("_")
    }


def test_the_fake_offers_every_call_of_the_port_with_its_signature() -> None:
    calls = port_calls()
    assert len(calls) == 32
    for name, signature in calls.items():
        fake = getattr(FakeApi, name, None)
        assert fake is not None and inspect.iscoroutinefunction(fake), name
        assert list(inspect.signature(fake).parameters) == list(signature.parameters), name


def test_the_adapter_offers_every_call_of_the_port() -> None:
    for name in port_calls():
        assert inspect.iscoroutinefunction(getattr(KubernetesApi, name)), name


def requests(api_server: Any, call: str, *args: Any) -> tuple[Any, list[tuple[str, str, Any]]]:  # noqa: F811
    answers, seen, client = api_server
    seen.clear()
    result = asyncio.run(getattr(KubernetesApi(client), call)(*args))
    return result, [(r["method"], r["url"], json.loads(r["body"]) if r["body"] else None) for r in seen]


def test_a_fresh_observation_is_five_lists_and_three_reads(api_server: Any) -> None:  # noqa: F811
    answers, _, _ = api_server
    for path in ("/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/persistentvolumeclaims",
                 "/apis/batch/v1/namespaces/ns/jobs", "/api/v1/namespaces/ns/services",
                 "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices"):
        answers[("GET", path)] = (200, {"items": []})
    _, made = requests(api_server, "observation", "ns", "db")
    assert made == [
        ("GET", f"/api/v1/namespaces/ns/pods?{SELECTOR}", None),
        ("GET", f"/api/v1/namespaces/ns/persistentvolumeclaims?{SELECTOR}", None),
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/db", None),
        ("GET", "/apis/batch/v1/namespaces/ns/cronjobs/db-backup", None),
        ("GET", f"/apis/batch/v1/namespaces/ns/jobs?{SELECTOR}", None),
        ("GET", f"/api/v1/namespaces/ns/services?{SELECTOR}", None),
        ("GET", "/api/v1/namespaces/ns/configmaps/db-primary", None),
        ("GET", f"/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices?{SELECTOR}", None),
    ]


def test_each_write_is_one_request(api_server: Any) -> None:  # noqa: F811
    answers, _, _ = api_server
    answers[("POST", "/apis/batch/v1/namespaces/ns/jobs")] = (409, {"kind": "Status", "code": 409})
    answers[("PATCH", "/api/v1/namespaces/ns/pods/db-0")] = (200, {})
    answers[("PATCH", "/apis/myapp.example.com/v1/namespaces/ns/mydatabases/db/status")] = (200, {})
    answers[("PUT", "/api/v1/namespaces/ns/configmaps/db-primary")] = (200, {"metadata": {"resourceVersion": "9"}})
    created, made = requests(api_server, "create_job_once", {"metadata": {"namespace": "ns", "name": "j"}})
    assert created is False and made == [("POST", "/apis/batch/v1/namespaces/ns/jobs",
                                          {"metadata": {"namespace": "ns", "name": "j"}})]
    _, made = requests(api_server, "label_pod", "ns", "db-0", "role", "primary")
    assert made == [("PATCH", "/api/v1/namespaces/ns/pods/db-0", {"metadata": {"labels": {"role": "primary"}}})]
    _, made = requests(api_server, "patch_status", "ns", "db", {"phase": "Running"})
    assert made == [("PATCH", "/apis/myapp.example.com/v1/namespaces/ns/mydatabases/db/status",
                     {"status": {"phase": "Running"}})]
    record = {"metadata": {"namespace": "ns", "name": "db-primary", "resourceVersion": "3"}}
    version, made = requests(api_server, "write_record", record)
    assert version == "9" and made == [("PUT", "/api/v1/namespaces/ns/configmaps/db-primary", record)]


def test_the_primary_lease_is_read_created_and_replaced_at_its_resource_version(api_server: Any) -> None:  # noqa: F811
    answers, _, _ = api_server
    collection = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
    answers[("GET", f"{collection}/db-primary")] = (404, {"kind": "Status", "code": 404})
    answers[("POST", collection)] = (201, {"metadata": {"resourceVersion": "5"}})
    answers[("PUT", f"{collection}/db-primary")] = (409, {"kind": "Status", "code": 409})
    assert requests(api_server, "read_lease", "ns", "db-primary")[0] is None
    body = {"metadata": {"namespace": "ns", "name": "db-primary"}, "spec": {"holderIdentity": "db-1"}}
    version, made = requests(api_server, "write_lease", body)
    assert version == "5" and made == [("POST", collection, body)]
    stale = {**body, "metadata": {**body["metadata"], "resourceVersion": "4"}}  # renewed since it was read
    try:
        requests(api_server, "write_lease", stale)
    except ApiException as error:
        assert error.status == 409
    else:
        raise AssertionError("a stale lease was written")


def test_the_client_is_made_on_first_use_and_a_dedicated_connection_has_its_own() -> None:
    api = KubernetesApi()
    assert api._client is None  # nothing made before the operator loaded its config
    own = api.dedicated()
    assert isinstance(own, Connection) and own.client is not api.client


def test_a_database_in_a_namespace_being_deleted_is_read_and_let_go_at_its_resource_version(
    api_server: Any,  # noqa: F811
) -> None:
    answers, _, _ = api_server
    database = "/apis/myapp.example.com/v1/namespaces/ns/mydatabases/db"
    answers[("GET", database)] = (200, {"metadata": {"name": "db", "resourceVersion": "7"}})
    answers[("GET", "/api/v1/namespaces/ns")] = (200, {"metadata": {"deletionTimestamp": "2026-12-04T18:00:00Z"}})
    answers[("GET", "/api/v1/namespaces/gone")] = (404, {"kind": "Status", "code": 404})
    answers[("GET", "/api/v1/namespaces/hidden")] = (403, {"kind": "Status", "code": 403})
    answers[("PATCH", database)] = (200, {})
    found, made = requests(api_server, "read_database", "ns", "db")
    assert found["metadata"]["resourceVersion"] == "7" and made == [("GET", database, None)]
    assert requests(api_server, "namespace_terminating", "ns")[0] is True
    assert requests(api_server, "namespace_terminating", "gone")[0] is True
    assert requests(api_server, "namespace_terminating", "hidden")[0] is False  # may not read namespaces
    _, made = requests(api_server, "release_finalizer", "ns", "db", "7", ["other/finalizer"])
    assert made == [("PATCH", database, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/metadata/finalizers", "value": ["other/finalizer"]},
    ])]


def test_the_credentials_secret_is_replaced_as_read_at_its_resource_version(api_server: Any) -> None:  # noqa: F811
    answers, _, _ = api_server
    path = "/api/v1/namespaces/ns/secrets/db-credentials"
    answers[("PUT", path)] = (200, {})
    metadata = {"namespace": "ns", "name": "db-credentials", "resourceVersion": "4"}
    secret = {"metadata": metadata, "data": {"password": "cA==", "ca.crt": "b2xk"}}
    _, made = requests(api_server, "update_secret_data", secret, {"ca.crt": None, "uri": "u"})
    assert made == [("PUT", path, {"metadata": metadata, "data": {"password": "cA==", "uri": "dQ=="}})]
    assert secret["data"] == {"password": "cA==", "ca.crt": "b2xk"}  # the Secret as read is left as it was
