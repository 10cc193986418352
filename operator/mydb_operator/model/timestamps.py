"""The API's time stamps (RFC 3339, as metadata and conditions carry them) as datetimes, and back. Pure."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(text: str | None) -> datetime | None:
    """'2026-12-03T07:55:02Z' (or with a fraction or an offset) as an aware datetime; None when absent or unreadable."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def rfc3339(moment: datetime) -> str:
    """The API's spelling, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """The API's spelling to the microsecond (a Lease's acquireTime and renewTime: MicroTime)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
