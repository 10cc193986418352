"""The tests' own kubectl commands (apicommands.py) leave the cluster as kubectl leaves it, or go to kubectl."""

from __future__ import annotations

import json

import pytest

from .apicommands import Command, condition_met, parse, run, wait_for_condition
from .waiting import get_json

pytestmark = [pytest.mark.e2e, pytest.mark.no_operator]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.mark.parametrize("args, command", [
    (("apply", "-n", "ns", "-f", "-"), Command(("apply",), {"namespace": "ns", "filename": "-"})),
    (("-n", "ns", "patch", "mydb/db", "--type=merge", "-p", "{}"),
     Command(("patch", "mydb/db"), {"namespace": "ns", "type": "merge", "patch": "{}"})),
    (("logs", "--namespace=ns", "pod", "-c", "postgres"),
     Command(("logs", "pod"), {"namespace": "ns", "container": "postgres"})),
    (("apply", "--server-side", "-f", "-"), None),  # a flag this module does not take: kubectl's
    (("-n", "ns"), None),  # no verb
])
def test_commands_are_parsed_and_other_flags_left_to_kubectl(args, command) -> None:
    assert parse(args) == command


@pytest.mark.parametrize("conditions, generation, status_generation, met", [
    ([{"type": "Ready", "status": "True"}], 1, None, True),
    ([{"type": "ready", "status": "true"}], 1, None, True),
    ([{"type": "Ready", "status": "False"}], 1, None, False),
    ([{"type": "Ready", "status": "True", "observedGeneration": 1}], 2, None, False),  # older than the spec
    ([{"type": "Ready", "status": "True"}], 2, 1, False),
    ([{"type": "Ready", "status": "True"}], 2, 2, True),
    ([{"type": "Other", "status": "True"}], 1, None, False),
])
def test_a_condition_is_met_as_kubectl_wait_decides(conditions, generation, status_generation, met) -> None:
    status = {"conditions": conditions, **({"observedGeneration": status_generation} if status_generation else {})}
    assert condition_met({"metadata": {"generation": generation}, "status": status}, "Ready") is met


def database(name: str, **spec) -> str:
    return json.dumps({"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase",
                       "metadata": {"name": name, "labels": {"b": "2", "a": "1"}},
                       "spec": {"version": "15.2", "replicas": 1, "storage": "1Gi", **spec}})


def test_an_object_created_here_is_what_kubectl_apply_creates(cluster, operator_kubeconfig, namespace) -> None:
    made = run(cluster.kubeconfig, ("apply", "-n", namespace, "-f", "-"),
               database("here", backup={"schedule": "0 2 * * *", "retention": "7d"}))
    assert made is not None and made.stdout == "mydatabase.myapp.example.com/here created\n"
    kubectl = cluster.kubectl("apply", "-n", namespace, "-f", "-", kubeconfig=cluster.kubeconfig,
                              stdin=database("there", backup={"schedule": "0 2 * * *", "retention": "7d"}))
    assert kubectl.stdout == "mydatabase.myapp.example.com/there created\n"
    here, there = (get_json(cluster, "-n", namespace, "mydb", name) for name in ("here", "there"))
    recorded = [json.loads(found["metadata"]["annotations"][LAST_APPLIED]) for found in (here, there)]
    recorded[0]["metadata"]["name"] = "there"
    assert recorded[0] == recorded[1]
    # A later kubectl apply without the backup removes it from both alike: the three-way merge has what it needs.
    for name in ("here", "there"):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=database(name), kubeconfig=cluster.kubeconfig)
        assert "backup" not in get_json(cluster, "-n", namespace, "mydb", name)["spec"]
    # An object that exists, and an invalid one, are kubectl's: its message and exit code.
    assert run(cluster.kubeconfig, ("apply", "-n", namespace, "-f", "-"), database("here")) is None
    assert run(cluster.kubeconfig, ("apply", "-n", namespace, "-f", "-"), database("bad", replicas=-1)) is None
    refused = cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=database("bad", replicas=-1), check=False)
    assert refused.returncode != 0 and "replicas" in refused.stderr


def test_a_patch_made_here_prints_and_does_what_kubectl_patch_does(cluster, operator_kubeconfig, namespace) -> None:
    for name in ("here", "there"):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=database(name))
    merge = ("--type=merge", "-p", '{"spec": {"replicas": 2}}')
    json_patch = ("--type=json", "-p", '[{"op": "replace", "path": "/spec/version", "value": "15.3"}]')
    for patch in (merge, merge, json_patch):
        made = run(cluster.kubeconfig, ("patch", "-n", namespace, "mydb/here", *patch), None)
        printed = cluster.kubectl("patch", "-n", namespace, "mydb/there", *patch, kubeconfig=cluster.kubeconfig)
        assert made is not None and made.stdout == printed.stdout.replace("/there", "/here"), patch
    here, there = (get_json(cluster, "-n", namespace, "mydb", name)["spec"] for name in ("here", "there"))
    assert here == there and (here["replicas"], here["version"]) == (2, "15.3")
    assert run(cluster.kubeconfig, ("patch", "-n", namespace, "mydb/here", "--type=merge", "-p",
                                    '{"spec": {"replicas": -1}}'), None) is None  # refused: kubectl's


def test_a_wait_ends_when_the_condition_holds_for_the_current_generation(cluster, operator_kubeconfig,
                                                                         namespace) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=database("waited"))
    generation = get_json(cluster, "-n", namespace, "mydb", "waited")["metadata"]["generation"]
    assert wait_for_condition(cluster.kubeconfig, "mydb", namespace, "waited", "Ready", 2) == (
        False, "timed out after 2s")
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Test", "message": "",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                                        "observedGeneration": generation}]}}
    cluster.kubectl("patch", "-n", namespace, "mydb/waited", "--subresource=status", "--type=merge", "-p",
                    json.dumps(ready))
    assert wait_for_condition(cluster.kubeconfig, "mydb", namespace, "waited", "Ready", 10) == (True, "")
    assert wait_for_condition(cluster.kubeconfig, "mydb", namespace, "absent", "Ready", 10)[0] is False
