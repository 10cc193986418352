"""-n values as kopf reads them: the informers cache exactly the namespaces kopf serves."""

from __future__ import annotations

import pytest

from mydb_operator.cluster.informers import informer_scopes
from mydb_operator.model.namespaces import any_pattern, managed


@pytest.mark.parametrize(
    ("values", "namespace", "expected"),
    [
        ((), "anything", True),
        (("team-a",), "team-a", True),
        (("team-a",), "team-ab", False),
        (("gw0-*",), "gw0-test-1", True),
        (("gw0-*",), "gw1-test-1", False),
        (("gw0-*", "gw1-*"), "gw1-test-1", True),
        (("myapp-*, !*-pr-*, *pr-123",), "myapp-live", True),
        (("myapp-*, !*-pr-*, *pr-123",), "myapp-pr-123", True),
        (("myapp-*, !*-pr-*, *pr-123",), "myapp-pr-456", False),
        (("myapp-*, !*-pr-*, *pr-123",), "otherapp-pr-123", False),
        (("!*-pr-*, *pr-123",), "otherapp-pr-123", True),
        (("!kube-*",), "kube-system", False),
        (("!kube-*",), "default", True),
    ],
)
def test_a_namespace_is_managed_as_kopf_matches_it(values, namespace, expected):
    assert managed(values, namespace) is expected


def test_names_are_listed_one_by_one_and_a_patterns_namespaces_are_followed():
    assert informer_scopes([]) == [None]
    assert informer_scopes(["a", "b"]) == ["a", "b"]
    assert informer_scopes(["a", "team-*"]) == []  # the NamespaceFollower's, each as it appears
    assert any_pattern(["!kube-*"]) and any_pattern(["a,b"]) and not any_pattern(["team-a"])
