"""From a MyDatabase to the bundled chart's values: pure functions, no cluster."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .. import names
from ..model.errors import SpecError
from ..model.lease import FENCE_SECONDS, RENEW_SECONDS
from ..model.spec import DatabaseSpec
from .platform import Platform, apply_values, denied, unoffered, unpinned


def build_values(release: str, spec: DatabaseSpec) -> dict[str, Any]:
    """The Helm values for one database. Never holds a password: the chart reads the Secret by name.

    Only what the spec says goes in, so platform defaults (desired/platform.py) show
    through wherever the MyDatabase is silent."""
    values: dict[str, Any] = {
        "replicas": 0 if spec.hibernate else spec.replicas,
        "image": {"tag": spec.version},
        "storage": {"size": spec.storage},
        "credentials": {"secretName": spec.existing_secret or names.credentials_secret_name(release)},
        "application": {"secretName": names.application_secret_name(release)},  # helm test's login
        "roleLabel": names.ROLE_LABEL,
        "backup": {"enabled": False},
        # The operator restarts the pods itself (reconcile/topology.py): replicas, then one switchover.
        "updateStrategy": "OnDelete",
        "replication": {"synchronous": spec.synchronous},
        "tls": {"enabled": True, "secretName": tls_secret_name(release, spec)} if spec.tls else {"enabled": False},
        # The primary renews the lease the operator keeps, and stops when it cannot (model/lease.py).
        "primaryLease": {"enabled": True, "renewSeconds": RENEW_SECONDS, "fenceSeconds": FENCE_SECONDS},
    }
    if spec.storage_class_name:
        values["storage"]["storageClassName"] = spec.storage_class_name
    optional = {
        "resources": spec.resources,
        "podLabels": spec.pod_labels,
        "podAnnotations": spec.pod_annotations,
        "nodeSelector": spec.node_selector,
        "tolerations": list(spec.tolerations),
        "affinity": spec.affinity,
    }
    values.update({key: value for key, value in optional.items() if value})
    if spec.postgresql_parameters:
        values["postgresql"] = {"parameters": dict(spec.postgresql_parameters)}
    if spec.backup:
        values["backup"] = {
            "enabled": True,
            "schedule": spec.backup.schedule,
            "retention": spec.backup.retention,
            "storage": {"size": spec.backup.storage},
        }
        if spec.backup.resources:
            values["backup"]["resources"] = spec.backup.resources
        if not spec.backup.continuous:  # only when off: a chart before 0.8.0 takes no such value
            values["backup"]["continuous"] = False
        if spec.storage_class_name:
            values["backup"]["storage"]["storageClassName"] = spec.storage_class_name
    if spec.restore:
        values["restore"] = {
            "enabled": True,
            "claimName": names.backups_claim_name(spec.restore.from_database),
            "backup": spec.restore.backup,
        }
        if spec.restore.point_in_time:
            values["restore"]["pointInTime"] = spec.restore.point_in_time
    return values


def tls_secret_name(release: str, spec: DatabaseSpec) -> str:
    """The Secret the servers' certificate comes from: the user's (spec.tls.secretName), else the operator's."""
    return spec.tls_secret or names.server_tls_secret_name(release)


def postgres_port(values: Mapping[str, Any], chart_default: int = names.POSTGRES_PORT) -> int:
    """The port the servers listen on, from the values Helm gets: postgresql.port, else the chart's default.

    The one rule for the port: status.endpoints, the credentials Secret's URIs and the operator's own
    connections to the servers all take it from here (through the start-up check's render, which
    helm/chart_check.py keeps as ChartFit.port). A MyDatabase has no port (its parameters may not set
    `port`), so only the platform's values and valuePatches move it, for every database alike."""
    port = (values.get("postgresql") or {}).get("port")
    return port if isinstance(port, int) and not isinstance(port, bool) else chart_default


def owner_value(name: str, uid: str) -> dict[str, str]:
    """The chart's `owner` value: the MyDatabase every object but the claims gets an ownerReference to."""
    return {"apiVersion": f"{names.GROUP}/{names.VERSION}", "kind": names.KIND, "name": name, "uid": uid}


# Values a chart takes only since 0.7.0 (0.8.0 for the dotted ones, 0.10.0 for tls, 0.12.0 for application, 0.13.0
# for primaryLease): an older
# chart (a database upgraded from it) or a platform's own chart that does not declare them is not given them, as it
# would refuse an unknown key.
NEWER_VALUES = (
    "updateStrategy",
    "replication",
    "backup.continuous",
    "restore.pointInTime",
    "tls",
    "application",
    "primaryLease",
)


def value_keys(defaults: dict[str, Any]) -> frozenset[str]:
    """The keys a chart's values.yaml declares: each top-level key, and parent.child one level down."""
    nested = {f"{key}.{child}" for key, value in defaults.items() if isinstance(value, dict) for child in value}
    return frozenset(defaults) | nested


def database_values(
    name: str, spec: DatabaseSpec, platform: Platform, owner_uid: str = "", chart_keys: frozenset[str] | None = None
) -> dict[str, Any]:
    """The values Helm gets for a database: the spec's over the platform's, then the platform's patches,
    then the owner (when the chart takes one: a platform cannot change who owns the objects).
    chart_keys: the keys the chart's values.yaml declares (value_keys; None: the bundled chart's).

    The one place values are made, for the operator and for `render`/`values` alike."""
    if (why := unoffered(platform, spec.major) or unpinned(platform, spec.version)) is not None:
        raise SpecError("version", why)
    refused = denied(platform, spec.postgresql_parameters)
    if refused:
        raise SpecError(
            "postgresql.parameters",
            f"{', '.join(refused)} cannot be set here: the operator manages them, or they trade durability away",
        )
    own = build_values(name, spec)
    if spec.version in platform.image_digests:
        own["image"] = {**own.get("image", {}), "digest": platform.image_digests[spec.version]}
    values = apply_values(platform, own)
    for key in NEWER_VALUES:
        if chart_keys is not None and key not in chart_keys:
            if key == "replication" and spec.synchronous:
                raise SpecError("replication.synchronous", "the chart in use does not take replication values")
            if key == "tls" and spec.tls_secret:
                raise SpecError("tls.secretName", "the chart in use has no TLS: it serves plain TCP")
            if key == "restore.pointInTime" and spec.restore and spec.restore.point_in_time:
                raise SpecError("restore.pointInTime", "the chart in use cannot recover to a moment")
            parent, _, child = key.partition(".")
            if child:  # an older chart has no archive: dumps only is what it does anyway
                (values.get(parent) or {}).pop(child, None)
            else:
                values.pop(key, None)
    if owner_uid:
        values["owner"] = owner_value(name, owner_uid)
    return values


def release_hash(chart_digest: str, values: dict[str, Any]) -> str:
    """What was applied, in one string: equal hashes mean Helm would change nothing."""
    payload = json.dumps({"chart": chart_digest, "values": values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
