"""Warning Events: one when a problem first shows (or changes), not one per retry. Pure."""

from __future__ import annotations

from typing import Any

Event = tuple[str, str, str]  # (type, reason, message)
ALARMS = {("Degraded", "True"), ("BackupHealthy", "False")}  # condition states worth a Warning
# Told by an Event of their own when they start (FailoverStarted, SwitchoverStarted): no second Warning.
TOLD_ELSEWHERE = {"FailingOver", "SwitchingOver"}
# A full volume's message carries its figures, which move while the same volumes stay full: its problem is
# which pods are full (status.storage.full), not the words.
BY_FULL_PODS = "DiskFull"
# The primary down with no replica to promote is one problem while it lasts, whatever each replica's reason is
# from one pass to the next (behind, then not answering a moment): one Warning; status has the latest words.
BY_REASON = frozenset({"NoEligibleReplica"})


def warnings_for(previous: dict[str, Any], status: dict[str, Any]) -> list[Event]:
    """A Warning Event when a problem first shows (or changes), not on every retry."""
    before = {c["type"]: c for c in previous.get("conditions") or []}
    warnings = []
    for new in status["conditions"]:
        alarming = (new["type"], new["status"]) in ALARMS or new["reason"] == "ExpansionNotSupported"
        alarming = alarming and new["reason"] not in TOLD_ELSEWHERE
        old = before.get(new["type"], {})
        if alarming and problem(old, previous) != problem(new, status):
            warnings.append(("Warning", new["reason"], new["message"]))
    return warnings


def problem(condition: dict[str, Any], status: dict[str, Any]) -> tuple[Any, ...]:
    """What a condition is about: its reason and words, or for a full volume the pods that are full."""
    if condition.get("reason") == BY_FULL_PODS:
        full = (status.get("storage") or {}).get("full") or []
        return BY_FULL_PODS, frozenset(entry["pod"] for entry in full)
    if condition.get("reason") in BY_REASON:
        return (condition.get("reason"),)
    return condition.get("reason"), condition.get("message")


def kept_data_warnings(previous: dict[str, Any], status: dict[str, Any]) -> list[Event]:
    """One Warning for each directory of data a pod newly kept aside (entrypoint.sh): it may hold commits that no
    server has, and nothing removes it."""
    known = {
        (entry.get("name"), kept.get("directory"))
        for entry in previous.get("instances") or []
        for kept in entry.get("keptData") or []
    }
    warnings = []
    for entry in status.get("instances") or []:
        for kept in entry.get("keptData") or []:
            if (entry.get("name"), kept.get("directory")) in known:
                continue
            diverged = f", diverged at {kept['divergedAt']}" if kept.get("divergedAt") else ""
            message = (
                f"{entry.get('name')} kept data it could not follow the primary with as {kept.get('directory')} "
                f"on its volume ({kept.get('reason', 'unknown reason')}{diverged}, timeline {kept.get('timeline', '?')}"
                f" up to checkpoint {kept.get('checkpoint', '?')}, {kept.get('bytes', '?')} bytes): it may hold "
                "commits no server has; see docs/high-availability.md, Kept data"
            )
            warnings.append(("Warning", "DivergedDataKept", message))
    return warnings


def checksum_warnings(previous: dict[str, Any], status: dict[str, Any]) -> list[Event]:
    """One Warning each time a server's count of data pages that failed their checksum when read rises: a page
    on its disk is damaged (not through PostgreSQL), and queries reading it fail."""
    known = {entry.get("name"): entry.get("checksumFailures", 0) for entry in previous.get("instances") or []}
    warnings = []
    for entry in status.get("instances") or []:
        count = entry.get("checksumFailures", 0)
        if count > known.get(entry.get("name"), 0):
            message = (
                f"{entry.get('name')} read {count} data pages whose checksum failed (pg_stat_database): a page on its "
                "disk is damaged and queries that read it fail; see docs/backups.md, Damaged pages"
            )
            warnings.append(("Warning", "DataChecksumFailures", message))
    return warnings


def archive_fork_warnings(previous: dict[str, Any], status: dict[str, Any]) -> list[Event]:
    """One Warning for each range of WAL the archive newly holds past a failover's fork (policy/archive.py):
    commits no server has, kept on the backup volume."""

    def forks(of: dict[str, Any]) -> list[dict[str, Any]]:
        return list(((of.get("backup") or {}).get("archive") or {}).get("diverged") or [])

    known = {(d.get("timeline"), d.get("from")) for d in forks(previous)}
    return [
        (
            "Warning",
            "ArchiveKeptDivergedWAL",
            f"the WAL archive holds {d.get('bytes')} bytes of timeline {d.get('timeline')} (from {d.get('from')} "
            f"to at least {d.get('to')}) that the new primary does not have: commits the failover lost, kept as "
            f"{d.get('keptIn')} on the backup volume; see docs/backups.md, Diverged WAL",
        )
        for d in forks(status)
        if (d.get("timeline"), d.get("from")) not in known
    ]
