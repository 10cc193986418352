"""The replica to promote: the most WAL first, within the lag limit; and why none can be. Pure.

Asynchronous replication: a replica is eligible only when the primary's own
last answer (model/sighting.py), read at most SIGHTING_MAX_AGE_SECONDS before
it stopped serving, listed it as streaming, it is on that primary's timeline,
and its received WAL is within maxLagOnFailover of the freshest position known
(that answer, or a replica's that went further since). Lacking such an answer
nothing is promoted: a lag judged on a guess is no limit. Synchronous
replication: every replica must answer, and the one with the most WAL has
every acknowledged commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .. import names
from ..model.instances import InstanceFacts, Unreachable, lsn_text
from ..model.pods import role_label
from ..model.sighting import Sighting
from .members import Members, outage_began, serving, why_not_serving

# The primary's position must have been read at most this long before it stopped serving. The operator reads it
# every SIGHTING_INTERVAL_SECONDS (reconcile/topology.py) while replicas stream asynchronously; the margin is
# for passes that a busy machine delays.
SIGHTING_MAX_AGE_SECONDS = 30.0


@dataclass(frozen=True)
class Refusal:
    why: str


def ranked(candidates: list[InstanceFacts]) -> list[InstanceFacts]:
    """The most WAL received first, then the most replayed, then by name."""
    return sorted(candidates, key=lambda f: (-f.wal_lsn, -(f.replay_lsn or 0), f.pod))


def outage_start(members: Members, primary: str) -> datetime:
    """When PRIMARY stopped serving: its pod's deletion or unreadiness (or its lease's stillness, members.silent),
    else the moment the database left Ready, else now."""
    return outage_began(members, primary) or members.down_since or members.now


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
    if members.settings.synchronous:
        return ranked(candidates)[0]
    return within_lag(members, exclude, candidates)


def within_lag(members: Members, primary: str, candidates: list[InstanceFacts]) -> InstanceFacts | Refusal:
    """The best candidate that streamed from PRIMARY on its timeline, within maxLagOnFailover of the freshest
    position known; or why none is."""
    sighting = fresh_sighting(members, primary)
    if isinstance(sighting, Refusal):
        return sighting
    reference = max([sighting.lsn, *(c.wal_lsn for c in candidates)])
    eligible: list[InstanceFacts] = []
    reasons: list[str] = []
    for facts in candidates:
        lag = reference - facts.wal_lsn
        if sighting.timeline is not None and facts.timeline != sighting.timeline:
            reasons.append(f"{facts.pod} is on timeline {facts.timeline}, {primary} was on {sighting.timeline}")
        elif facts.pod not in sighting.streaming:
            reasons.append(f"{facts.pod} was not streaming from {primary} when it last answered")
        elif lag > members.settings.max_lag:
            reasons.append(
                f"{facts.pod} is {lag} bytes behind {lsn_text(reference)}, more than maxLagOnFailover "
                f"({members.settings.max_lag} bytes)"
            )
        else:
            eligible.append(facts)
    if not eligible:
        return Refusal("; ".join(reasons))
    return ranked(eligible)[0]


def fresh_sighting(members: Members, primary: str) -> Sighting | Refusal:
    """PRIMARY's last answer as a primary, when it was read shortly enough before it stopped serving."""
    sighting = members.sighting
    if sighting is None or sighting.pod != primary:
        return Refusal(
            f"no WAL position of {primary} read while it served (the operator started after it stopped): "
            "a replica's lag cannot be judged, so none is promoted"
        )
    age = (outage_start(members, primary) - sighting.at).total_seconds()
    if age > SIGHTING_MAX_AGE_SECONDS:
        return Refusal(
            f"{primary}'s WAL position was last read {age:.0f}s before it stopped serving (more than "
            f"{SIGHTING_MAX_AGE_SECONDS:.0f}s): a replica's lag cannot be judged, so none is promoted"
        )
    return sighting


def choice_figures(members: Members, primary: str, chosen: InstanceFacts) -> str:
    """The figures a failover's choice stood on, for its Event."""
    received = f"{chosen.pod} received {lsn_text(chosen.wal_lsn)} on timeline {chosen.timeline}"
    if members.settings.synchronous:
        return f"{received}, the most of every replica (synchronous replication)"
    sighting = members.sighting
    if sighting is None:
        return received
    age = (outage_start(members, primary) - sighting.at).total_seconds()
    lag = max(0, sighting.lsn - chosen.wal_lsn)
    return (
        f"{received}; {primary} was at {lsn_text(sighting.lsn)} {max(0.0, age):.1f}s before it stopped serving: "
        f"{lag} bytes behind it, within maxLagOnFailover ({members.settings.max_lag} bytes)"
    )
