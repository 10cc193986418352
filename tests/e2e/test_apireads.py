"""The tests' own reads (apireads.py) print what kubectl prints, or leave the read to kubectl."""

from __future__ import annotations

import json

import pytest

from .apireads import ALL_NAMESPACES, GetArgs, parse_get, reads_for

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("args, read", [
    (("get", "-n", "ns", "mydb", "db"), GetArgs("mydb", "db", "ns", ())),
    (("get", "pods", "--namespace=ns", "-l", "app=x"), GetArgs("pods", None, "ns", (("labelSelector", "app=x"),))),
    (("get", "-A", "events", "--field-selector", "type=Warning"),
     GetArgs("events", None, ALL_NAMESPACES, (("fieldSelector", "type=Warning"),))),
    (("get", "StatefulSet/db", "-n", "ns"), GetArgs("statefulset", "db", "ns", ())),
    (("get", "pods", "-o", "json"), None),  # said more than a read
    (("get", "pods,services"), None),
    (("get", "pods", "a", "b"), None),
    (("describe", "pods"), None),
])
def test_plain_reads_are_parsed_and_the_rest_left_to_kubectl(args, read) -> None:
    assert parse_get(args) == read


def test_a_read_is_what_kubectl_prints(cluster, operator, namespace) -> None:
    reads = reads_for(cluster.kubeconfig)

    def kubectl(*args: str) -> dict:
        return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)

    for args in (("-n", namespace, "configmap", "kube-root-ca.crt"), ("namespace", namespace),
                 ("crd", "mydatabases.myapp.example.com"), ("-n", namespace, "serviceaccount/default")):
        assert reads.get(("get", *args)) == kubectl(*args), args
    for args in (("-n", namespace, "configmaps"), ("-n", namespace, "mydb"), ("nodes", "-l", "type=kwok"),
                 ("-n", namespace, "events", "--field-selector", "type=Warning")):
        read, printed = reads.get(("get", *args)), kubectl(*args)
        assert [(i["kind"], i["metadata"]["name"]) for i in read["items"]] == [
            (i["kind"], i["metadata"]["name"]) for i in printed["items"]], args
    assert reads.get(("get", "nodes", "-l", "type=kwok"))["items"], "compared no node"
    assert reads.get(("get", "-n", namespace, "mydb", "nothing-here")) == {}
