"""A platform that pins its PostgreSQL images by digest (`imageDigests`): each database runs from exactly the
pinned image, a minor change moves to the next pin, status says the image and what the server runs, and a
version the platform pins no image for is refused before anything changes."""

from __future__ import annotations

import urllib.request

import pytest
import yaml

from .conftest import operator_instead, wait_ready
from .realnode import REGISTRY, local_node_platform
from .test_real_failures import ready_condition
from .test_real_postgres import create_db, sql
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e

MANIFESTS = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def registry_digest(repository: str, tag: str) -> str:
    """The digest the local registry serves REPOSITORY:TAG under, as a runtime pulling by digest asks for it."""
    request = urllib.request.Request(f"http://{REGISTRY}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": MANIFESTS})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Docker-Content-Digest"]


@pytest.fixture
def pinning_operator(operator, namespace, tmp_path):
    """An operator for this namespace on the real node whose platform pins 15.2 and 15.3 by digest."""
    pins = {tag: registry_digest("library/postgres", tag) for tag in ("15.2", "15.3")}
    platform = tmp_path / "platform.yaml"
    platform.write_text(yaml.safe_dump({**local_node_platform(), "majors": [15], "imageDigests": pins}))
    with operator_instead(operator, namespace, "operator-pinned.log", MYDB_PLATFORM_CONFIG=str(platform)):
        yield pins


def pod_image(cluster, namespace: str, pod: str) -> str:
    return get_json(cluster, "-n", namespace, "pod", pod)["spec"]["containers"][0]["image"]


def server_version(cluster, namespace: str, pod: str) -> str:
    number = int(sql(cluster, namespace, pod, "show server_version_num"))
    return f"{number // 10000}.{number % 10000}"


def test_pinned_images_run_by_digest_and_a_minor_change_moves_to_the_next_pin(cluster, pinning_operator, namespace):
    pins = pinning_operator
    create_db(cluster, namespace, "pinned", replicas=1)
    wait_ready(cluster, namespace, "pinned", timeout=300)
    expected = f"{REGISTRY}/library/postgres:15.2@{pins['15.2']}"
    assert pod_image(cluster, namespace, "pinned-0") == expected
    status = get_json(cluster, "-n", namespace, "mydb", "pinned")["status"]
    assert status["image"] == expected
    assert status["version"] == server_version(cluster, namespace, "pinned-0")

    # The policy reads the tag past the digest: a minor change rolls out, to the next pin's digest.
    cluster.kubectl("patch", "-n", namespace, "mydb/pinned", "--type=merge", "-p", '{"spec": {"version": "15.3"}}')
    moved = f"{REGISTRY}/library/postgres:15.3@{pins['15.3']}"
    wait_for("pinned deployed from the 15.3 pin and Ready", lambda: (lambda s: s.get("image") == moved
             and s.get("ready") is True and not s.get("pendingRestart"))(
        get_json(cluster, "-n", namespace, "mydb", "pinned").get("status") or {}), timeout=300)
    assert pod_image(cluster, namespace, "pinned-0") == moved
    assert get_json(cluster, "-n", namespace, "mydb", "pinned")["status"]["version"] == server_version(
        cluster, namespace, "pinned-0")

    # A version with no pin is refused in status; the pod keeps its image.
    cluster.kubectl("patch", "-n", namespace, "mydb/pinned", "--type=merge", "-p", '{"spec": {"version": "15.4"}}')
    refused = "spec.version: PostgreSQL 15.4 has no pinned image on this platform, which pins 15.2, 15.3"
    wait_for("15.4 refused", lambda: refused in ready_condition(cluster, namespace, "pinned").get("message", ""),
             timeout=60)
    assert pod_image(cluster, namespace, "pinned-0") == moved
