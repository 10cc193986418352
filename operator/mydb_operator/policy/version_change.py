"""Version changes: minor ones roll out, a major one is refused with the supported path. Pure."""

from __future__ import annotations

from ..model.spec import DatabaseSpec
from ..model.versions import major


def version_refusal(spec: DatabaseSpec, running: str | None) -> str | None:
    """Why the spec's version cannot be applied in place, or None.

    Minor changes, up or down, keep the on-disk format and roll out as a normal
    update (replicas first, the primary last). A major change needs pg_upgrade,
    which this operator does not run."""
    if running is None or major(running) == spec.major:
        return None
    return (
        f"version {running} -> {spec.version} changes the major version in place, which is not supported: "
        f"create a new MyDatabase with version {spec.version} and spec.restore from a backup of this one, "
        f"move the clients, then delete this one (or set version back to {major(running)}.x)"
    )
