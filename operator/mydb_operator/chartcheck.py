"""Start-up check of the chart (bundled or a platform's own): does it render what the operator relies on?"""

from __future__ import annotations

from typing import Any

from . import api
from .helm import Helm, HelmError
from .model import SpecError, parse_spec
from .platform import Platform, PlatformError
from .values import database_values

SUPPORTED_MAJORS = range(13, 18)
PROBE = "chart-check"


def missing_objects(objects: list[dict[str, Any]], release: str) -> list[str]:
    """What the operator needs from a render and did not find. Pure."""
    found = {(o.get("kind"), o.get("metadata", {}).get("name")): o for o in objects}
    problems = []
    sts = found.get(("StatefulSet", release))
    if sts is None:
        problems.append(f"no StatefulSet named {release} (the release name)")
    else:
        spec = sts["spec"]
        if spec.get("selector", {}).get("matchLabels") != api.selector_labels(release):
            problems.append(f"the StatefulSet must select on exactly {api.selector_labels(release)}")
        if not any(c["name"] == "postgres" for c in spec["template"]["spec"].get("containers", [])):
            problems.append("the StatefulSet has no container named postgres (its image tag is the version)")
        if not any(t["metadata"]["name"] == "data" for t in spec.get("volumeClaimTemplates", [])):
            problems.append("the StatefulSet has no volumeClaimTemplate named data (storage growth needs it)")
    for service in (release, f"{release}-ro", f"{release}-headless"):
        if ("Service", service) not in found:
            problems.append(f"no Service named {service}")
    if ("CronJob", f"{release}-backup") not in found:
        problems.append(f"no CronJob named {release}-backup when backup is enabled")
    return problems


async def incompatibilities(helm: Helm, platform: Platform) -> list[str]:
    """Render the chart for every supported major, with backups and restore on; say what is wrong."""
    problems: list[str] = []
    for major in SUPPORTED_MAJORS:
        spec = parse_spec({"replicas": 2, "version": f"{major}.0", "storage": "1Gi",
                           "backup": {"schedule": "0 2 * * *"}, "restore": {"fromDatabase": "source"}})
        try:
            objects = await helm.template(PROBE, "default", database_values(PROBE, spec, platform))
        except HelmError as error:
            problems.append(f"version {major}.x: helm template failed: {error}")
            continue
        except (PlatformError, SpecError) as error:
            problems.append(f"version {major}.x: {error}")
            continue
        problems += [f"version {major}.x: {problem}" for problem in missing_objects(objects, PROBE)]
    return problems
