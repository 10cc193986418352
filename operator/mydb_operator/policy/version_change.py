"""Version changes: minor ones roll out, a later major upgrades, an earlier one is refused. Pure."""

from __future__ import annotations

from ..model.spec import DatabaseSpec
from ..model.versions import major


def version_refusal(spec: DatabaseSpec, running: str | None) -> str | None:
    """Why the spec's version cannot be applied, or None.

    Minor changes, up or down, keep the on-disk format and roll out as a normal
    update (replicas first, the primary last). A later major is a major upgrade
    (policy/major_upgrade.py holds the version until its data is upgraded); an
    earlier one cannot read the data (admission refuses it too)."""
    if running is None or major(running) <= spec.major:
        return None
    return (
        f"version {running} -> {spec.version} goes back a major, which PostgreSQL cannot do in place: "
        f"create a new MyDatabase with version {spec.version} and spec.restore from a backup of this one "
        f"(or set version back to {major(running)}.x)"
    )
