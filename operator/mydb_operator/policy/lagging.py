"""Replicas too far behind to serve reads or to be promoted, and why. Pure.

One rule for two uses: such a replica leaves the read-only Service (its role
label becomes `lagging`, policy/primary.steady) and makes the database
Degraded (status/primary.replicas_behind). It is judged against the primary's
answer of the same pass: not streaming, on another timeline, or further behind
than maxLagOnFailover. A replica ready less than SETTLING_SECONDS ago is still
connecting and not judged; one labelled lagging is labelled a replica again
only once it is within half the limit, so a replica near the line does not
flap in and out of the Service."""

from __future__ import annotations

from datetime import datetime

from .. import names
from ..model.instances import InstanceFacts, lsn_text
from ..model.pods import role_label
from ..model.record import FAILOVER, SWITCHOVER, PrimaryRecord
from ..model.timestamps import parse_time
from .actions import Action, Restart
from .members import Members, Object, deleting, made_after, serving, uid_of, unavailable_since

# A replica ready, or a primary promoted, this recently is still finding its feet: its WAL receiver (re)connects.
SETTLING_SECONDS = 30.0
# entrypoint.sh's serve exits so when its standby's history forked from the primary's (follow.sh's check).
DIVERGED_EXIT_CODE = 4


def why_behind(primary: InstanceFacts, facts: InstanceFacts, max_lag: int, *, strict: bool = False) -> str | None:
    """Why the replica FACTS is behind the PRIMARY, or None. STRICT: within half of MAX_LAG only (to come back)."""
    lag = primary.wal_lsn - facts.wal_lsn
    if facts.timeline != primary.timeline:
        return f"{facts.pod} is on timeline {facts.timeline}, the primary on {primary.timeline}"
    if facts.receiver != "streaming":
        return f"{facts.pod} is not streaming"
    if lag > (max_lag // 2 if strict else max_lag):
        return f"{facts.pod} is further behind the primary than maxLagOnFailover ({max_lag} bytes)"
    return None


def settling(pod: Object, now: datetime) -> bool:
    """Ready for less than SETTLING_SECONDS (not ready at all counts too: it is no candidate either way)."""
    if not serving(pod) or unavailable_since(pod) is not None:
        return True
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready: dict[str, object] = next((c for c in conditions if c.get("type") == "Ready"), {})
    since = parse_time(str(ready.get("lastTransitionTime") or ""))
    return since is not None and (now - since).total_seconds() < SETTLING_SECONDS


def just_promoted(record: PrimaryRecord | None, now: datetime) -> bool:
    """The recorded primary was promoted less than SETTLING_SECONDS ago, or its promotion is not recorded yet:
    the replicas are still moving onto its timeline."""
    if record is None or record.reason not in (FAILOVER, SWITCHOVER):
        return False
    promoted = parse_time(record.promoted_at)
    return promoted is None or (now - promoted).total_seconds() < SETTLING_SECONDS


def replica_role(members: Members, pod: Object, facts: InstanceFacts | None) -> str:
    """The role label a replica's pod should have: `lagging` while it is behind, else `replica`. A replica that
    cannot be judged now (not asked, settling, a primary just promoted) keeps `lagging` if it has it."""
    primary = members.facts(members.primary)
    current = role_label(pod)
    judged = (
        primary is not None
        and not primary.in_recovery
        and facts is not None
        and facts.in_recovery
        and not settling(pod, members.now)
        and not just_promoted(members.record, members.now)
    )
    if not judged:
        return names.LAGGING if current == names.LAGGING else names.REPLICA
    assert primary is not None and facts is not None
    behind = why_behind(primary, facts, members.settings.max_lag, strict=current == names.LAGGING)
    return names.LAGGING if behind is not None else names.REPLICA


def rejoin_restarts(members: Members) -> list[Action]:
    """Replicas left on an older timeline than the primary, their WAL receivers not streaming, settled past a
    promotion: most likely they streamed from the old primary past the fork (it went on taking writes), and can
    never follow the new one as they are. Their pods are restarted, once (only a pod made before the promotion):
    the init container rewinds such a replica onto the primary's timeline (follow.sh), or keeps its data aside
    and clones it afresh."""
    primary, record = members.facts(members.primary), members.record
    exited = [p for p in members.others() if not deleting(p) and diverged_exit(p)]
    restarts: list[Action] = [
        Restart(p["metadata"]["name"], uid_of(p), rejoin_reason(p["metadata"]["name"], None, primary)) for p in exited
    ]
    if primary is None or primary.in_recovery or primary.timeline is None or record is None or not record.promoted_at:
        return restarts
    if just_promoted(record, members.now):
        return restarts
    for pod in members.others():
        if pod in exited:
            continue
        facts = members.facts(pod["metadata"]["name"])
        if facts is None or not facts.in_recovery or facts.receiver == "streaming" or deleting(pod):
            continue
        behind = facts.timeline is not None and facts.timeline < primary.timeline
        if behind and not settling(pod, members.now) and not made_after(pod, record.promoted_at):
            name = pod["metadata"]["name"]
            restarts.append(Restart(name, uid_of(pod), rejoin_reason(name, facts, primary)))
    return restarts


def rejoin_reason(name: str, facts: InstanceFacts | None, primary: InstanceFacts | None) -> str:
    """Why the replica NAME is restarted to rejoin, and the WAL of its own that the rewind discards when the
    primary's history says where its timeline forked off the replica's."""
    if facts is None or primary is None or facts.timeline is None:
        return (
            f"{name}'s server stopped: its history forked from the primary's; restarting it to rewind it onto "
            "the primary's timeline (or keep its data aside and clone)"
        )
    fork = dict(primary.switchpoints).get(facts.timeline)
    # What it has: a WAL receiver that started again reports from its segment's start, below what was replayed.
    has = max(facts.wal_lsn, facts.replay_lsn or 0)
    if fork is not None and has > fork:
        return (
            f"{name} has WAL of timeline {facts.timeline} up to {lsn_text(has)}, past {lsn_text(fork)} where the "
            f"primary's timeline {primary.timeline} forked off it: restarting it to rewind onto the primary's "
            f"timeline, which discards {lsn_text(fork)} to {lsn_text(has)} on it (the former primary's kept data "
            "or the archive may hold those commits)"
        )
    return (
        f"{name} is on timeline {facts.timeline}, not streaming, behind the primary's timeline {primary.timeline}: "
        "restarting it to follow the primary"
    )


def diverged_exit(pod: Object) -> bool:
    """The pod's server container last exited saying its standby diverged from the primary (entrypoint.sh's
    serve: exit DIVERGED_EXIT_CODE, "delete the pod: its init container rewinds this standby")."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") != names.POSTGRES_CONTAINER:
            continue
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            if (state.get("terminated") or {}).get("exitCode") == DIVERGED_EXIT_CODE:
                return True
    return False
