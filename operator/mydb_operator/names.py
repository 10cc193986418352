"""Every name the operator shares with the API server and the bundled chart.

The MyDatabase API (group, kind, finalizer), the labels and annotations the
operator owns, and the names the chart gives one release's objects: one place,
so that renaming an object cannot leave one of its readers behind.
"""

from __future__ import annotations

import hashlib

from . import __version__

# ---------------------------------------------------------------- the MyDatabase API

# The user agent of every API call the operator makes (Helm's have Helm's): the API server
# names an update's field manager after it, so managedFields, audit logs and API metrics
# say mydb-operator instead of the client library's "OpenAPI-Generator".
USER_AGENT = f"mydb-operator/{__version__}"

GROUP = "myapp.example.com"
VERSION = "v1"
PLURAL = "mydatabases"
KIND = "MyDatabase"

FINALIZER = f"{GROUP}/finalizer"
ANNOTATION_PREFIX = GROUP
ROLE_LABEL = f"{GROUP}/role"
# fenced: a former primary on its way out, selected by neither the read-write nor the read-only Service.
PRIMARY, REPLICA, FENCED = "primary", "replica", "fenced"
LAGGING = "lagging"  # a replica too far behind to serve reads: out of the read-only Service (policy/lagging.py)
# Names the pod to make the primary by a planned switchover (kubectl annotate mydb/NAME
# myapp.example.com/switchover-to=NAME-1); the operator removes it once it has answered.
SWITCHOVER_ANNOTATION = f"{ANNOTATION_PREFIX}/switchover-to"
# On the ConfigMap that records the primary (model/record.py), beside the chart's selector labels.
RECORD_LABEL = f"{GROUP}/record"
# A new value asks for one backup now (kubectl annotate ... backup-now="$(date +%s)").
BACKUP_NOW_ANNOTATION = f"{ANNOTATION_PREFIX}/backup-now"
# A new value asks for one verification of the newest base backup and the archive (a recovery in a throwaway pod).
VERIFY_BACKUP_ANNOTATION = f"{ANNOTATION_PREFIX}/verify-backup"
# A new value tries a failed major upgrade again (policy/major_upgrade.py).
RETRY_UPGRADE_ANNOTATION = f"{ANNOTATION_PREFIX}/retry-upgrade"
# A new server certificate now (a key that may have leaked): the operator issues one and removes the annotation.
ROTATE_CERTIFICATE_ANNOTATION = f"{ANNOTATION_PREFIX}/rotate-certificate"
ON_DEMAND_BACKUP_LABEL = f"{GROUP}/backup"
# On the leader-election Lease: marks it as an operator's, and names the namespaces it guards
# ("*" or "a,b"), so that another instance can tell whether their scopes overlap.
OPERATOR_LEASE_LABEL = f"{GROUP}/operator-lease"
OPERATOR_SCOPE_ANNOTATION = f"{GROUP}/operator-scope"

# ---------------------------------------------------------------- the bundled chart's labels

# Labels the bundled chart puts on everything it renders (selectors use name + instance).
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CHART_NAME = "mydatabase"
OPERATOR_NAME = "mydb-operator"


def selector_labels(release: str) -> dict[str, str]:
    """The labels that select one database's pods (what the StatefulSet selects on)."""
    return {NAME_LABEL: CHART_NAME, INSTANCE_LABEL: release}


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def release_record_labels(release: str) -> dict[str, str]:
    """The labels Helm puts on every stored revision of a release (one ConfigMap each)."""
    return {"owner": "helm", "name": release}


# ---------------------------------------------------------------- one release's objects

POSTGRES_CONTAINER = "postgres"  # its image tag is the running version
# The container that answers the kubelet's probes of the server (the bundled chart's; a platform's may have none).
PROBE_CONTAINER = "probe"
DATA_CLAIM_TEMPLATE = "data"  # the StatefulSet's claim template: claims data-RELEASE-N
# The bundled chart's default postgresql.port (its values.yaml: tests/chart/test_one_source.py holds them
# equal). The port a database's servers listen on is its rendered values' (desired/values.postgres_port).
POSTGRES_PORT = 5432
# The continuous archive (chart: scripts/wal-archive.sh): its walsender's application_name and its slot.
ARCHIVE_APPLICATION_NAME = "mydb-archive"
ARCHIVE_SLOT = "mydb_archive"
# Each replica's replication slot on the primary (chart: entrypoint.sh makes its own; the operator keeps them on
# whichever server is primary, policy/slots.py): mydb_replica_<ordinal>.
REPLICA_SLOT_PREFIX = "mydb_replica_"


def read_write_service(release: str) -> str:
    """The Service that selects the primary."""
    return release


def read_only_service(release: str) -> str:
    """The Service that selects the replicas."""
    return f"{release}-ro"


def headless_service(release: str) -> str:
    return f"{release}-headless"


def pod_name(release: str, ordinal: int) -> str:
    return f"{release}-{ordinal}"


def pod_host(namespace: str, release: str, pod: str) -> str:
    """A pod's DNS name through the headless Service: what a replica's primary_conninfo names (role.sh)."""
    return f"{pod}.{headless_service(release)}.{namespace}.svc"


def primary_record(release: str) -> str:
    """The ConfigMap the operator records the primary in; the chart mounts it (optional) into the pods."""
    return f"{release}-primary"


def release_services(release: str) -> tuple[str, str, str]:
    """Every Service the chart renders for a release."""
    return read_write_service(release), read_only_service(release), headless_service(release)


def service_host(namespace: str, service: str) -> str:
    return f"{service}.{namespace}.svc"


def backup_cronjob(release: str) -> str:
    return f"{release}-backup"


def first_base_backup_job(release: str, major: int) -> str:
    """The Job of the first base backup of a database's archive at MAJOR (a new database's, or one upgraded
    to MAJOR in place); a backup-now value's Job ends in 8 hex digits instead."""
    return f"{release}-backup-first-{major}"


def verification_job(release: str, token: str) -> str:
    """One Job per verify-backup value."""
    return f"{release}-verify-{hashlib.sha256(token.encode()).hexdigest()[:8]}"


COMPONENT_LABEL = "app.kubernetes.io/component"
MAJOR_UPGRADE_COMPONENT = "major-upgrade"  # the component label of a major upgrade's Job and pod


def major_upgrade_job(release: str, started_at: str) -> str:
    """One Job per upgrade attempt (a retry starts at another moment)."""
    return f"{release}-upgrade-{hashlib.sha256(started_at.encode()).hexdigest()[:8]}"


def archive_statefulset(release: str) -> str:
    """The continuous archive's StatefulSet of one pod (chart: templates/wal-archive.yaml)."""
    return f"{release}-wal"


def on_demand_backup_job(release: str, token: str) -> str:
    """One Job per backup-now value: the same request always names the same Job."""
    return f"{release}-backup-{hashlib.sha256(token.encode()).hexdigest()[:8]}"


def data_claim_prefix(release: str) -> str:
    return f"{DATA_CLAIM_TEMPLATE}-{release}-"


def is_database_pod(pod_name: str, release: str) -> bool:
    """A pod of the release's StatefulSet (`<release>-<ordinal>`), not its helm test or backup pods."""
    prefix, _, ordinal = pod_name.rpartition("-")
    return prefix == release and ordinal.isdigit()


def pod_ordinal(pod_name: str) -> int:
    return int(pod_name.rsplit("-", 1)[1])


def replica_slot(pod_name: str) -> str:
    """The replication slot a replica streams through: its ordinal's."""
    return f"{REPLICA_SLOT_PREFIX}{pod_ordinal(pod_name)}"


def credentials_secret_name(release: str) -> str:
    """The Secret the operator creates for a database that names none of its own."""
    return f"{release}-credentials"


def backups_claim_name(release: str) -> str:
    """The PersistentVolumeClaim the chart gives a database's backups."""
    return f"{release}-backups"


def application_secret_name(release: str) -> str:
    """The application role's login (spec.application), in the layout clients expect."""
    return f"{release}-app"


def ca_secret_name(release: str) -> str:
    """The database's own certificate authority (its key too): only the operator reads it."""
    return f"{release}-ca"


def server_tls_secret_name(release: str) -> str:
    """The servers' certificate, key and CA (cert-manager's layout), made by the operator unless
    spec.tls.secretName names one of the user's."""
    return f"{release}-tls"
