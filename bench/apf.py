"""The operator's own API requests, told apart from everyone else's.

apiserver_request_total has no user label: the controller manager, the
scheduler and kwok (every simulated kubelet) count there too. But API Priority
and Fairness classifies every request by its user into a FlowSchema, and
apiserver_flowcontrol_dispatched_requests_total counts per FlowSchema. So the
benchmark installs one FlowSchema per (verb, resource) that matches only the
operator's ServiceAccount (Helm runs with the same token, so its requests are
the operator's too), all in the priority level that ServiceAccount gets anyway
(workload-low, via the built-in `service-accounts` schema): the operator is
throttled exactly as without them. Requests no specific schema names fall into
a per-verb catch-all, and non-resource requests (discovery, /version) into one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from . import prom

PREFIX = "mydb-bench-op"
PART_OF = {"app.kubernetes.io/part-of": "mydb-bench"}
PRIORITY_LEVEL = "workload-low"  # what the built-in `service-accounts` FlowSchema gives every ServiceAccount
VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# What the operator and its Helm touch (a subresource must be named on its own: "pods" does not match "pods/status").
RESOURCES = [
    "mydatabases",
    "mydatabases/status",
    "pods",
    "services",
    "statefulsets",
    "cronjobs",
    "jobs",
    "persistentvolumeclaims",
    "secrets",
    "configmaps",
    "endpointslices",
    "events",
    "storageclasses",
    "namespaces",
    "customresourcedefinitions",
    "leases",
    "serviceaccounts",
]
OTHER = "(other)"
NON_RESOURCE = "(non-resource)"


def _schema(name: str, precedence: int, sa_namespace: str, sa_name: str, rule: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "spec": {
            "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {"kind": "ServiceAccount", "serviceAccount": {"namespace": sa_namespace, "name": sa_name}}
                    ],
                    **rule,
                }
            ],
        },
    }


def flow_schemas(sa_namespace: str, sa_name: str) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """The FlowSchemas, and what each counts: {schema name: (verb, resource)}.

    Precedences sit below the built-in service-accounts schema (9000), so these
    match first; the specific ones before the per-verb catch-alls."""
    schemas, meaning = [], {}
    for verb in VERBS:
        for resource in RESOURCES:
            name = f"{PREFIX}-{verb}-{resource.replace('/', '-')}"
            schemas.append(
                _schema(
                    name,
                    1000,
                    sa_namespace,
                    sa_name,
                    {
                        "resourceRules": [
                            {
                                "verbs": [verb],
                                "apiGroups": ["*"],
                                "resources": [resource],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ]
                    },
                )
            )
            meaning[name] = (verb, resource)
    for verb in [*VERBS, "deletecollection"]:
        name = f"{PREFIX}-{verb}-other"
        schemas.append(
            _schema(
                name,
                1100,
                sa_namespace,
                sa_name,
                {
                    "resourceRules": [
                        {
                            "verbs": [verb],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "namespaces": ["*"],
                            "clusterScope": True,
                        }
                    ]
                },
            )
        )
        meaning[name] = (verb, OTHER)
    name = f"{PREFIX}-nonresource"
    schemas.append(
        _schema(name, 1200, sa_namespace, sa_name, {"nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]})
    )
    meaning[name] = ("get", NON_RESOURCE)
    return schemas, meaning


METRIC = "apiserver_flowcontrol_dispatched_requests_total"


def operator_requests(delta: prom.Samples, meaning: dict[str, tuple[str, str]]) -> dict[str, dict[str, float]]:
    """{verb: {resource: requests}} the operator made in a window (from a diff of APF counters)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for schema, count in prom.by_label(
        {k: v for k, v in delta.items() if k[0] == METRIC}, METRIC, "flow_schema"
    ).items():
        if schema in meaning:
            verb, resource = meaning[schema]
            out[verb][resource] += count
    return {verb: dict(resources) for verb, resources in out.items()}


# The leader election's own traffic: a renewal every third of the Lease's
# duration however many databases there are, so it is counted apart.
LEASES = "leases"


def reads_writes(by_verb: dict[str, dict[str, float]]) -> tuple[float, float]:
    """The operator's reads and writes for its databases (the Lease's apart: lease_writes)."""

    def total(verbs_wanted: bool) -> float:
        return sum(
            count
            for verb, resources in by_verb.items()
            if (verb in WRITE_VERBS) == verbs_wanted
            for resource, count in resources.items()
            if resource != LEASES
        )

    return total(False), total(True)


def lease_writes(by_verb: dict[str, dict[str, float]]) -> float:
    return sum(resources.get(LEASES, 0) for verb, resources in by_verb.items() if verb in WRITE_VERBS)


# What each of the operator's writes is for, in the terms; Helm's
# release records are ConfigMaps (the operator's Helm storage driver), as is the chart's scripts ConfigMap.
WRITE_KINDS = (
    ("status", "mydatabases/status"),
    ("pod labels", "pods"),
    ("events", "events"),
    ("secrets", "secrets"),
    ("mydatabases", "mydatabases"),
    ("configmaps (Helm records, scripts, the primary's record)", "configmaps"),
)


def writes_by_kind(by_verb: dict[str, dict[str, float]]) -> dict[str, float]:
    """The operator's writes grouped by what they are for ("others": Helm's chart objects and the rest),
    the Lease's renewals left out as in reads_writes."""
    kind_of = {resource: kind for kind, resource in WRITE_KINDS}
    out = {kind: 0.0 for kind, _ in WRITE_KINDS} | {"others": 0.0}
    for verb, resources in by_verb.items():
        if verb not in WRITE_VERBS:
            continue
        for resource, count in resources.items():
            if resource != LEASES:
                out[kind_of.get(resource, "others")] += count
    return out
