"""What a major upgrade's state makes of the conditions. Pure.

A refused one (policy/major_upgrade.py's Refused: the platform has no image
for the major, too little room, a Job that cannot be built) is a problem as
any refused change is: phase Failed, Degraded True, one Warning Event
(status/warnings.py), while its pods still serve the old major. While no pod
serves because of one, Degraded does not say Healthy."""

from __future__ import annotations

from ..policy.major_upgrade import FAILED, REFUSED, STARTING, UNDER_WAY, UpgradeState
from .problem import Problem

REFUSED_REASON = "MajorUpgradeRefused"
# The pods are down for it, the new major's are not up yet, or the old major's are not back yet after it failed.
OUTAGE = (*UNDER_WAY, STARTING, FAILED)


def upgrade_problem(state: UpgradeState | None) -> Problem | None:
    """The problem a refused major upgrade is, or None."""
    if state is None or state.phase != REFUSED:
        return None
    return Problem(REFUSED_REASON, state.message)


def calm_degraded(state: UpgradeState | None, serving: bool, reason: str, message: str) -> tuple[str, str]:
    """Degraded False's reason and message: Healthy, unless no pod serves (SERVING false) for a major
    upgrade; then the phase's own (REASON, MESSAGE: MajorUpgrade while the pods are down)."""
    if serving or state is None or state.phase not in OUTAGE:
        return "Healthy", "no failures"
    return reason, message
