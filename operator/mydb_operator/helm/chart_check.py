"""Start-up check of the chart (bundled or a platform's own): does it render what the operator relies on?"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..desired.platform import Platform, PlatformError, probe_version
from ..desired.values import database_values, postgres_port, value_keys
from ..model.errors import SpecError
from ..model.spec import parse_spec
from ..policy.deletion import owned_by
from .errors import HelmError
from .releases import Helm

PROBE = "chart-check"
PROBE_UID = "00000000-0000-0000-0000-000000000000"
# Claims hold the data: deleting the MyDatabase must never take them with it.
NEVER_OWNED = ("PersistentVolumeClaim",)


@dataclass(frozen=True)
class ChartFit:
    """What the start-up check found: what is wrong, and whether deletion can leave the objects to the
    garbage collector (the chart takes an `owner` value and puts it on every object but the claims)."""

    problems: list[str] = field(default_factory=list)
    takes_owner: bool = False
    unowned: list[str] = field(default_factory=list)  # "Kind/name" rendered without the owner reference
    # The StatefulSet's podManagementPolicy as rendered: immutable, so a live StatefulSet with another
    # is re-created around its pods before Helm upgrades it (reconcile/acting.py).
    pod_management: str = "OrderedReady"
    # The keys of the chart's values.yaml (desired/values.value_keys): values it does not declare are not
    # passed to it.
    value_keys: frozenset[str] = frozenset()
    # The servers' port in the values the operator renders (desired/values.postgres_port: the platform's
    # postgresql.port, else the chart's default): status.endpoints, the Secret's URIs and the probes use it.
    port: int = names.POSTGRES_PORT

    @property
    def owns_children(self) -> bool:
        return self.takes_owner and not self.unowned


def declares_owner(default_values: dict[str, Any]) -> bool:
    """A chart takes the `owner` value when its values.yaml declares the key. Pure."""
    return "owner" in default_values


def unowned_objects(objects: list[dict[str, Any]], uid: str) -> list[str]:
    """Rendered objects (claims aside) without an ownerReference to `uid`, as "Kind/name". Pure."""
    return [
        f"{o.get('kind')}/{o.get('metadata', {}).get('name')}"
        for o in objects
        if o.get("kind") not in NEVER_OWNED and not owned_by(o, uid)
    ]


def missing_objects(objects: list[dict[str, Any]], release: str) -> list[str]:
    """What the operator needs from a render and did not find. Pure."""
    rendered = {(o.get("kind"), o.get("metadata", {}).get("name")): o for o in objects}
    problems = []
    sts = rendered.get(("StatefulSet", release))
    if sts is None:
        problems.append(f"no StatefulSet named {release} (the release name)")
    else:
        spec = sts["spec"]
        if spec.get("selector", {}).get("matchLabels") != names.selector_labels(release):
            problems.append(f"the StatefulSet must select on exactly {names.selector_labels(release)}")
        if not any(c["name"] == names.POSTGRES_CONTAINER for c in spec["template"]["spec"].get("containers", [])):
            problems.append(
                f"the StatefulSet has no container named {names.POSTGRES_CONTAINER} (its image tag is the version)"
            )
        if not any(t["metadata"]["name"] == names.DATA_CLAIM_TEMPLATE for t in spec.get("volumeClaimTemplates", [])):
            problems.append(
                f"the StatefulSet has no volumeClaimTemplate named {names.DATA_CLAIM_TEMPLATE} "
                "(storage growth needs it)"
            )
    for service in names.release_services(release):
        if ("Service", service) not in rendered:
            problems.append(f"no Service named {service}")
    cronjob = names.backup_cronjob(release)
    if ("CronJob", cronjob) not in rendered:
        problems.append(f"no CronJob named {cronjob} when backup is enabled")
    return problems


def port_problems(objects: list[dict[str, Any]], release: str, port: int) -> list[str]:
    """The release's Services must serve the port the operator will name (status.endpoints, the Secret's
    URIs): one a platform's own chart or an object patch moved elsewhere would make both wrong. Pure."""
    problems = []
    for service in names.release_services(release):
        found = next(
            (o for o in objects if (o.get("kind"), (o.get("metadata") or {}).get("name")) == ("Service", service)),
            None,
        )
        ports = [p.get("port") for p in ((found or {}).get("spec") or {}).get("ports") or []]
        if found is not None and port not in ports:
            problems.append(
                f"the Service {service} serves port(s) {', '.join(map(str, ports)) or 'none'}, not "
                f"postgresql.port {port} as the values give it"
            )
    return problems


async def check_chart(helm: Helm, platform: Platform) -> ChartFit:
    """Render the chart for every major the platform offers, with backups and restore on (and the owner, when the
    chart takes one); say what is wrong and which objects would not be owned."""
    defaults = await helm.default_values()
    takes_owner = declares_owner(defaults)
    problems: list[str] = []
    unowned: set[str] = set()
    pod_management = "OrderedReady"  # Kubernetes' default when the chart does not say
    port = postgres_port(defaults)  # the chart's own default, unless the values (the platform's) set one
    for major in platform.majors:
        spec = parse_spec(
            {
                "replicas": 2,
                "version": probe_version(platform, major),
                "storage": "1Gi",
                "backup": {"schedule": "0 2 * * *"},
                "restore": {"fromDatabase": "source"},
            }
        )
        try:
            values = database_values(
                PROBE, spec, platform, owner_uid=PROBE_UID if takes_owner else "", chart_keys=value_keys(defaults)
            )
            objects = await helm.template("default", PROBE, values)
        except HelmError as error:
            problems.append(f"version {major}.x: helm template failed: {error}")
            continue
        except (PlatformError, SpecError) as error:
            problems.append(f"version {major}.x: {error}")
            continue
        problems += [f"version {major}.x: {problem}" for problem in missing_objects(objects, PROBE)]
        port = postgres_port(values, postgres_port(defaults))
        problems += [f"version {major}.x: {problem}" for problem in port_problems(objects, PROBE, port)]
        sts = next(
            (o for o in objects if (o.get("kind"), (o.get("metadata") or {}).get("name")) == ("StatefulSet", PROBE)),
            None,
        )
        pod_management = ((sts or {}).get("spec") or {}).get("podManagementPolicy") or pod_management
        if takes_owner:
            unowned.update(unowned_objects(objects, PROBE_UID))
    return ChartFit(problems, takes_owner, sorted(unowned), pod_management, value_keys(defaults), port)
