"""The kinds the informers watch, and the label selector that keeps them to the chart's objects."""

from __future__ import annotations

from .. import names
from .resources import (
    CLAIMS,
    CONFIG_MAPS,
    CRONJOBS,
    ENDPOINT_SLICES,
    JOBS,
    PODS,
    SERVICES,
    STATEFULSETS,
    Resource,
)

# kind (the resource's plural) -> where it lives. ConfigMaps: the operator's record of the primary
# (and the chart's scripts, cached without their data); EndpointSlices: where the Services route
# now (they carry their Service's labels).
KINDS: dict[str, Resource] = {
    resource.plural: resource
    for resource in (PODS, SERVICES, CLAIMS, STATEFULSETS, CRONJOBS, JOBS, CONFIG_MAPS, ENDPOINT_SLICES)
}
# Only what the bundled chart labels: the API server filters, so other pods never reach us.
SELECTOR = f"{names.NAME_LABEL}={names.CHART_NAME},{names.INSTANCE_LABEL}"
