"""Names of the MyDatabase API and the labels and annotations the operator owns."""

GROUP = "myapp.example.com"
VERSION = "v1"
PLURAL = "mydatabases"
KIND = "MyDatabase"

FINALIZER = f"{GROUP}/finalizer"
ANNOTATION_PREFIX = GROUP
ROLE_LABEL = f"{GROUP}/role"
# On the leader-election Lease: marks it as an operator's, and names the namespaces it guards
# ("*" or "a,b"), so that another instance can tell whether their scopes overlap.
OPERATOR_LEASE_LABEL = f"{GROUP}/operator-lease"
OPERATOR_SCOPE_ANNOTATION = f"{GROUP}/operator-scope"
PRIMARY, REPLICA = "primary", "replica"

# Labels the bundled chart puts on everything it renders (selectors use name + instance).
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
CHART_NAME = "mydatabase"

DELETION_RETAIN, DELETION_DELETE = "Retain", "Delete"


def selector_labels(release: str) -> dict[str, str]:
    """The labels that select one database's pods (what the StatefulSet selects on)."""
    return {NAME_LABEL: CHART_NAME, INSTANCE_LABEL: release}


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
