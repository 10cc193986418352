"""Start-up check of the chart (bundled or a platform's own): does it render what the operator relies on?"""

from __future__ import annotations

from typing import Any

from .. import names
from ..desired.platform import Platform, PlatformError
from ..desired.values import database_values
from ..model.errors import SpecError
from ..model.spec import parse_spec
from ..model.versions import SUPPORTED_MAJORS
from .errors import HelmError
from .releases import Helm

PROBE = "chart-check"


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


async def incompatibilities(helm: Helm, platform: Platform) -> list[str]:
    """Render the chart for every supported major, with backups and restore on; say what is wrong."""
    problems: list[str] = []
    for major in SUPPORTED_MAJORS:
        spec = parse_spec(
            {
                "replicas": 2,
                "version": f"{major}.0",
                "storage": "1Gi",
                "backup": {"schedule": "0 2 * * *"},
                "restore": {"fromDatabase": "source"},
            }
        )
        try:
            objects = await helm.template("default", PROBE, database_values(PROBE, spec, platform))
        except HelmError as error:
            problems.append(f"version {major}.x: helm template failed: {error}")
            continue
        except (PlatformError, SpecError) as error:
            problems.append(f"version {major}.x: {error}")
            continue
        problems += [f"version {major}.x: {problem}" for problem in missing_objects(objects, PROBE)]
    return problems
