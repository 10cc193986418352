"""Warning Events: one when a problem first shows (or changes), not one per retry. Pure."""

from __future__ import annotations

from typing import Any

Event = tuple[str, str, str]  # (type, reason, message)
ALARMS = {("Degraded", "True"), ("BackupHealthy", "False")}  # condition states worth a Warning
# Told by an Event of their own when they start (FailoverStarted, SwitchoverStarted): no second Warning.
TOLD_ELSEWHERE = {"FailingOver", "SwitchingOver"}


def warnings_for(previous: dict[str, Any], status: dict[str, Any]) -> list[Event]:
    """A Warning Event when a problem first shows (or changes), not on every retry."""
    before = {c["type"]: c for c in previous.get("conditions") or []}
    warnings = []
    for new in status["conditions"]:
        alarming = (new["type"], new["status"]) in ALARMS or new["reason"] == "ExpansionNotSupported"
        alarming = alarming and new["reason"] not in TOLD_ELSEWHERE
        old = before.get(new["type"], {})
        if alarming and (old.get("reason"), old.get("message")) != (new["reason"], new["message"]):
            warnings.append(("Warning", new["reason"], new["message"]))
    return warnings
