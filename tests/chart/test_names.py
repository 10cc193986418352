"""The bundled chart renders every object under the name the operator reads it by (mydb_operator/names.py).

Rendered with the values the operator passes, for every supported major, with
backups and a restore on: the names module and the chart cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mydb_operator import names
from mydb_operator.desired.platform import Platform
from mydb_operator.desired.values import database_values
from mydb_operator.helm.chart_check import declares_owner, missing_objects, unowned_objects
from mydb_operator.model.spec import parse_spec
from mydb_operator.model.versions import SUPPORTED_MAJORS

RELEASE, NAMESPACE = "orders", "shop"
CHART = Path(__file__).resolve().parents[2] / "charts" / "mydatabase"


@pytest.mark.parametrize("major", list(SUPPORTED_MAJORS))
def test_every_object_the_operator_reads_is_rendered_under_its_name(render, major: int) -> None:
    spec = parse_spec({"replicas": 2, "version": f"{major}.4", "storage": "1Gi",
                       "backup": {"schedule": "0 2 * * *"}, "restore": {"fromDatabase": "source"}})
    rendered = render(database_values(RELEASE, spec, Platform()), release=RELEASE, namespace=NAMESPACE)
    assert missing_objects(rendered.docs, RELEASE) == []

    statefulset = rendered.get("StatefulSet", RELEASE)
    assert statefulset["spec"]["selector"]["matchLabels"] == names.selector_labels(RELEASE)
    (postgres,) = [c for c in statefulset["spec"]["template"]["spec"]["containers"]
                   if c["name"] == names.POSTGRES_CONTAINER]
    assert postgres["image"].rsplit(":", 1)[-1] == f"{major}.4"  # the running version is read from this tag
    (claim,) = [t for t in statefulset["spec"]["volumeClaimTemplates"]
                if t["metadata"]["name"] == names.DATA_CLAIM_TEMPLATE]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"

    assert {s["metadata"]["name"] for s in rendered.kinds("Service")} == set(names.release_services(RELEASE))
    read_write = rendered.get("Service", names.read_write_service(RELEASE))
    read_only = rendered.get("Service", names.read_only_service(RELEASE))
    assert read_write["spec"]["selector"][names.ROLE_LABEL] == names.PRIMARY
    assert read_only["spec"]["selector"][names.ROLE_LABEL] == names.REPLICA

    cronjob = rendered.get("CronJob", names.backup_cronjob(RELEASE))
    assert cronjob["metadata"]["labels"][names.INSTANCE_LABEL] == RELEASE
    archive = rendered.get("StatefulSet", names.archive_statefulset(RELEASE))
    archive_env = {e["name"]: e.get("value") for e in archive["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert archive_env["PGHOST"] == names.read_write_service(RELEASE)  # it follows the primary wherever it moves
    assert names.ARCHIVE_SLOT in rendered.text and names.ARCHIVE_APPLICATION_NAME in rendered.text  # wal-archive.sh
    assert names.backups_claim_name(RELEASE) in {c["metadata"]["name"] for c in rendered.kinds("PersistentVolumeClaim")}
    assert names.credentials_secret_name(RELEASE) in rendered.text  # the pods read the Secret by this name
    assert names.backups_claim_name("source") in rendered.text  # the restore reads the source's backups claim


def test_with_an_owner_every_object_but_the_claims_is_owned_by_the_database(render) -> None:
    """What lets deletion leave the objects to the garbage collector; claims hold the data and are never owned."""
    spec = parse_spec({"replicas": 2, "version": "16.1", "storage": "1Gi", "backup": {"schedule": "0 2 * * *"}})
    uid = "5b0e1f7c-4f55-4a8e-9a53-0d2c2f7c1a11"
    rendered = render(database_values(RELEASE, spec, Platform(), owner_uid=uid), release=RELEASE, namespace=NAMESPACE)
    kinds = {doc["kind"] for doc in rendered.docs}
    assert {"StatefulSet", "Service", "ConfigMap", "CronJob", "PodDisruptionBudget", "NetworkPolicy", "Pod"} <= kinds
    assert unowned_objects(rendered.docs, uid) == []
    for doc in rendered.docs:
        refs = doc["metadata"].get("ownerReferences")
        if doc["kind"] == "PersistentVolumeClaim":
            assert refs is None
        else:
            assert refs == [{"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "name": RELEASE, "uid": uid}]
    for template in rendered.get("StatefulSet", RELEASE)["spec"]["volumeClaimTemplates"]:
        assert "ownerReferences" not in template["metadata"]


def test_without_an_owner_nothing_is_owned(render) -> None:
    """helm template and `mydb-operator render` (no MyDatabase uid yet) render no ownerReference at all."""
    spec = parse_spec({"replicas": 2, "version": "16.1", "storage": "1Gi", "backup": {"schedule": "0 2 * * *"}})
    rendered = render(database_values(RELEASE, spec, Platform()), release=RELEASE, namespace=NAMESPACE)
    assert "ownerReferences" not in rendered.text
    assert len(unowned_objects(rendered.docs, "any")) == len(rendered.docs) - len(rendered.kinds("PersistentVolumeClaim"))


def test_the_bundled_chart_declares_the_owner_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert declares_owner(values) and values["owner"] == {}
    assert not declares_owner({key: value for key, value in values.items() if key != "owner"})
