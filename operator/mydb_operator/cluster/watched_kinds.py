"""The kinds the informers watch, and the label selector that keeps them to the chart's objects."""

from __future__ import annotations

from kubernetes import client

from .. import names

# kind -> (API group class, the kind's name in the client's method names)
KINDS: dict[str, tuple[type, str]] = {
    "pods": (client.CoreV1Api, "pod"),
    "services": (client.CoreV1Api, "service"),
    "persistentvolumeclaims": (client.CoreV1Api, "persistent_volume_claim"),
    "statefulsets": (client.AppsV1Api, "stateful_set"),
    "cronjobs": (client.BatchV1Api, "cron_job"),
    "jobs": (client.BatchV1Api, "job"),
}
# Only what the bundled chart labels: the API server filters, so other pods never reach us.
SELECTOR = f"{names.NAME_LABEL}={names.CHART_NAME},{names.INSTANCE_LABEL}"
