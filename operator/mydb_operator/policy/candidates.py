"""The replica to promote: the most WAL first, within the lag limit; and why none can be. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .. import names
from ..model.instances import InstanceFacts, Unreachable, lsn_text
from ..model.pods import role_label
from .members import Members, serving, why_not_serving


@dataclass(frozen=True)
class Refusal:
    why: str


def ranked(candidates: list[InstanceFacts]) -> list[InstanceFacts]:
    """The most WAL received first, then the most replayed, then by name."""
    return sorted(candidates, key=lambda f: (-f.wal_lsn, -(f.replay_lsn or 0), f.pod))


def choose_replica(members: Members, exclude: str) -> InstanceFacts | Refusal:
    """The replica to promote in place of EXCLUDE, or why there is none."""
    others = [p for p in members.pods if p["metadata"]["name"] != exclude]
    if not others:
        return Refusal("the database has no replica")
    reasons: list[str] = []
    candidates: list[InstanceFacts] = []
    for pod in sorted(others, key=lambda p: p["metadata"]["name"]):
        name = pod["metadata"]["name"]
        probe, facts = members.probes.get(name), members.facts(name)
        if not serving(pod) or role_label(pod) == names.FENCED:
            reasons.append(why_not_serving(pod, name))
        elif name in members.full:
            reasons.append(f"{name}'s data volume is full: it could not write either")
        elif isinstance(probe, Unreachable):
            reasons.append(f"{name} did not answer ({probe.error})")
        elif facts is None:
            reasons.append(f"{name} was not asked")
        elif not facts.in_recovery:
            reasons.append(f"{name} is not a replica")
        else:
            candidates.append(facts)
    if members.settings.synchronous:
        silent = [p["metadata"]["name"] for p in others if members.facts(p["metadata"]["name"]) is None]
        if silent:
            return Refusal(
                f"synchronous replication: {', '.join(silent)} did not answer, and may hold acknowledged "
                "commits the others lack"
            )
    if not candidates:
        return Refusal("; ".join(reasons) or "no replica answered")
    best = ranked(candidates)[0]
    if not members.settings.synchronous:
        reference = max(members.reference_lsn or 0, best.wal_lsn)
        lag = reference - best.wal_lsn
        if lag > members.settings.max_lag:
            return Refusal(
                f"the most advanced replica, {best.pod}, is {lag} bytes behind the primary's last known "
                f"position {lsn_text(reference)}, more than maxLagOnFailover ({members.settings.max_lag} bytes)"
            )
    return best
