"""What one PostgreSQL server says of itself when the operator asks (instances/probe.py). Pure.

A failover, a switchover and the status stand on these facts, not on ordinals
or labels: whether the server is in recovery, its timeline, how much WAL it has
(a primary's current position, a standby's received and replayed ones), whom
its WAL receiver follows, and, on a primary, the standbys streaming from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Standby:
    """One row of a primary's pg_stat_replication."""

    name: str  # application_name: the replica's pod name (entrypoint.sh sets it)
    state: str  # streaming, catchup, ...
    sync_state: str  # async, quorum, sync, potential
    flush_lsn: int | None
    replay_lsn: int | None
    reply_age: float | None = None  # seconds since its last reply, by the primary's clock


@dataclass(frozen=True)
class KeptData:
    """A data directory the pod could not follow the primary with, kept aside on its volume (entrypoint.sh)."""

    directory: str  # diverged-<UTC time>, beside PGDATA
    facts: Mapping[str, str]  # its mydb-kept.txt: reason, keptAt, timeline, checkpoint, divergedAt, bytes, ...


def kept_facts(text: str | None) -> dict[str, str]:
    """mydb-kept.txt's key=value lines (empty values left out)."""
    pairs = (line.partition("=") for line in (text or "").splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep and key.strip() and value.strip()}


@dataclass(frozen=True)
class InstanceFacts:
    """A server that answered."""

    pod: str
    in_recovery: bool
    timeline: int | None
    wal_lsn: int  # a primary's current WAL position; a standby's last received (flushed to its disk)
    replay_lsn: int | None = None  # a standby's last replayed
    receiver: str | None = None  # a standby's WAL receiver status (streaming, ...); None when none runs
    conninfo: str = ""  # a standby's primary_conninfo
    standbys: tuple[Standby, ...] = ()  # a primary's
    archive_slot: str | None = None  # the archive's slot here: its wal_status (reserved, ..., lost); None: no slot
    version: str = ""  # what the server runs, MAJOR.MINOR (model/versions.server_version)
    data_checksums: bool | None = None  # its pages carry checksums (initdb --data-checksums); None: not asked
    checksum_failures: int = 0  # pages it found damaged when it read them (pg_stat_database), since its stats began
    # With TLS on: the SHA-256 of the certificate file it has mounted (what the kubelet last wrote there), and
    # whether that file changed since the server last read its configuration (a reload makes it present it).
    certificate: str | None = None
    reload_due: bool = False
    kept: tuple[KeptData, ...] = ()  # data kept aside on its volume, oldest first
    replica_slots: tuple[tuple[str, bool], ...] = ()  # a primary's replicas' slots (policy/slots.py), and in use
    slot_name: str = ""  # a standby's primary_slot_name
    # A primary's history: (earlier timeline, the WAL position where it ended: its next one forked off there).
    switchpoints: tuple[tuple[int, int], ...] = ()

    @property
    def upstream(self) -> str | None:
        """The host a standby's WAL receiver connects to."""
        return conninfo_value(self.conninfo, "host")


@dataclass(frozen=True)
class Unreachable:
    """A server that did not answer (not running, hung, no route to it, refused the login)."""

    pod: str
    error: str


Probe = InstanceFacts | Unreachable


def lsn_text(lsn: int) -> str:
    """PostgreSQL's own spelling of a WAL position: 0/3000060."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_history(text: str | None) -> dict[int, int]:
    """A timeline history file's lines (parent timeline, switch point, reason; tab-separated, # comments) as
    timeline -> the WAL position where it ended. Lines it cannot read are left out."""
    found: dict[int, int] = {}
    for line in (text or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0].isdigit() and (lsn := parse_lsn(fields[1])) is not None:
            found[int(fields[0])] = lsn
    return found


def parse_lsn(text: str | None) -> int | None:
    """0/3000060 as a number; None when it is not a WAL position."""
    high, slash, low = (text or "").partition("/")
    try:
        return (int(high, 16) << 32) + int(low, 16) if slash else None
    except ValueError:
        return None


# --- libpq connection strings: keyword = value, a value optionally in single quotes with \ escapes


def parse_conninfo(conninfo: str) -> list[tuple[str, str]]:
    """The keyword/value pairs of a libpq connection string, in order."""
    pairs: list[tuple[str, str]] = []
    text, i = conninfo, 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        start = i
        while i < len(text) and text[i] != "=" and not text[i].isspace():
            i += 1
        key = text[start:i]
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != "=":
            raise ValueError(f"connection string: no '=' after {key!r}")
        i += 1
        while i < len(text) and text[i].isspace():
            i += 1
        value: list[str] = []
        if i < len(text) and text[i] == "'":
            i += 1
            while i < len(text) and text[i] != "'":
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                value.append(text[i])
                i += 1
            if i >= len(text):
                raise ValueError(f"connection string: unterminated quote in the value of {key!r}")
            i += 1
        else:
            while i < len(text) and not text[i].isspace():
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                value.append(text[i])
                i += 1
        pairs.append((key, "".join(value)))
    return pairs


def conninfo_value(conninfo: str, key: str) -> str | None:
    try:
        return dict(parse_conninfo(conninfo)).get(key)
    except ValueError:
        return None


def with_value(conninfo: str, key: str, value: str) -> str:
    """The same connection string with KEY set to VALUE (the other settings kept, in order)."""
    pairs = parse_conninfo(conninfo)
    if any(k == key for k, _ in pairs):
        pairs = [(k, value if k == key else v) for k, v in pairs]
    else:
        pairs.append((key, value))
    return " ".join(f"{k}={_quoted(v)}" for k, v in pairs)


def _quoted(value: str) -> str:
    if value and not any(c.isspace() or c in "'\\" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
