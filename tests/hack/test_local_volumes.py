"""hack/local_volumes.py: which claims get an XFS volume, of what size, when it grows and when it goes.

The volumes themselves (mkfs.xfs, the loop mount, xfs_growfs online) are proven on the real node by
tests/e2e/test_local_volumes.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))  # it imports volume_agent by plain name, as hack/ scripts do
_spec = importlib.util.spec_from_file_location("local_volumes", REPO / "hack" / "local_volumes.py")
volumes = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = volumes
_spec.loader.exec_module(volumes)

DIR = "/c/state/local-volumes"
NODE = "mydb-real-1"


def claim(*, uid="u1", request="1Gi", node=NODE, provisioner=volumes.PROVISIONER, volume_name=None,
          shown=None, deleting=False) -> dict:
    annotations = {volumes.STORAGE_PROVISIONER: provisioner}
    if node:
        annotations[volumes.SELECTED_NODE] = node
    metadata = {"name": "data-db-0", "namespace": "ns", "uid": uid, "annotations": annotations}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    spec = {"storageClassName": "local-xfs", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": request}}}
    if volume_name:
        spec["volumeName"] = volume_name
    status = {"phase": "Bound", "capacity": {"storage": shown}} if shown else {"phase": "Pending"}
    return {"metadata": metadata, "spec": spec, "status": status}


@pytest.mark.parametrize("text, expected", [
    ("1Gi", 2**30), ("300Mi", 300 * 2**20), ("1.5Gi", 3 * 2**29), ("500M", 500 * 10**6), ("2", 2),
    ("0.1Ki", 103),  # rounded up: a volume is never smaller than asked
])
def test_quantities_in_bytes(text, expected):
    assert volumes.quantity_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "1GB", "-1Gi", "1e3", "Gi"])
def test_a_malformed_quantity_is_refused(text):
    with pytest.raises(ValueError):
        volumes.quantity_bytes(text)


def test_a_claim_under_xfs_smallest_gets_the_smallest():
    assert volumes.volume_capacity("100Mi") == "300Mi"
    assert volumes.volume_capacity("300Mi") == "300Mi"
    assert volumes.volume_capacity("1Gi") == "1Gi"


@pytest.mark.parametrize("kwargs, wanted", [
    ({}, True),
    ({"node": "kwok-node-0"}, False),  # placed on another node: not ours to make
    ({"node": None}, False),  # not scheduled yet (WaitForFirstConsumer)
    ({"provisioner": "simulated.csi.mydb.local"}, False),
    ({"volume_name": "pvc-u1"}, False),  # already bound
    ({"deleting": True}, False),
])
def test_which_claims_get_a_volume(kwargs, wanted):
    assert volumes.wants_volume(claim(**kwargs), frozenset({NODE, "mydb-real-2"})) is wanted


def test_the_volume_is_local_on_the_node_and_pre_bound_to_its_claim():
    pv = volumes.persistent_volume(claim(request="100Mi"), NODE, DIR)
    assert pv["metadata"]["name"] == "pvc-u1"
    assert pv["spec"]["local"]["path"] == f"{DIR}/pvc-u1"
    assert pv["spec"]["capacity"] == {"storage": "300Mi"}
    assert pv["spec"]["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data-db-0",
                                      "namespace": "ns", "uid": "u1"}
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}
    assert volumes.ours(pv, DIR) == "pvc-u1"


def test_only_our_volumes_under_our_folder_are_ours():
    pv = volumes.persistent_volume(claim(), NODE, DIR)
    assert volumes.ours(pv, "/elsewhere") is None
    assert volumes.ours({**pv, "metadata": {"name": "pvc-u1", "annotations": {}}}, DIR) is None
    hostpath = {"metadata": {"name": "p", "annotations": {volumes.PROVISIONED_BY: volumes.PROVISIONER}},
                "spec": {"hostPath": {"path": f"{DIR}/pvc-u1"}}}
    assert volumes.ours(hostpath, DIR) is None


def test_a_bound_claim_asking_for_more_grows_its_volume_and_only_then():
    pv = volumes.persistent_volume(claim(), NODE, DIR)
    assert volumes.growth(claim(request="2Gi", volume_name="pvc-u1"), pv) == "2Gi"
    assert volumes.growth(claim(request="1Gi", volume_name="pvc-u1"), pv) is None
    assert volumes.growth(claim(request="1024Mi", volume_name="pvc-u1"), pv) is None  # the same size
    assert volumes.growth(claim(request="2Gi", volume_name="pvc-other"), pv) is None


def test_a_claim_whose_status_lags_its_grown_volume_is_told():
    pv = volumes.persistent_volume(claim(request="2Gi"), NODE, DIR)
    assert volumes.claim_status_behind(claim(request="2Gi", volume_name="pvc-u1", shown="1Gi"), pv)
    assert not volumes.claim_status_behind(claim(request="2Gi", volume_name="pvc-u1", shown="2Gi"), pv)
    assert not volumes.claim_status_behind(claim(request="2Gi", volume_name="pvc-u1"), pv)  # not bound yet


def test_released_volumes_with_reclaim_delete_go():
    pv = volumes.persistent_volume(claim(), NODE, DIR)
    assert not volumes.releasable(pv)
    assert volumes.releasable({**pv, "status": {"phase": "Released"}})
    retained = {**pv, "spec": {**pv["spec"], "persistentVolumeReclaimPolicy": "Retain"},
                "status": {"phase": "Released"}}
    assert not volumes.releasable(retained)


def test_files_no_pv_names_are_orphans():
    pvs = [volumes.persistent_volume(claim(uid=uid), NODE, DIR) for uid in ("a", "b")]
    assert volumes.orphans({"pvc-a", "pvc-b", "pvc-c"}, pvs, DIR) == ["pvc-c"]
    assert volumes.orphans({"pvc-a"}, pvs, DIR) == []
