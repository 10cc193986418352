"""spec.backup.retention: the one rule for how long backups are kept. Pure.

The CRD's `pattern` (crds/), the chart's values.schema.json and the check in
the chart's scripts/prune.sh say the same in their own files, which cannot
import this one; tests/chart/test_one_source.py holds each of them to it (the
patterns as text, and a table of examples through each)."""

from __future__ import annotations

import re

# A whole number above zero, no leading zero, then h, d or w: 12h, 7d, 4w. Written so that RE2 (the API
# server), ECMA-262 (helm's JSON schema), POSIX grep -E (prune.sh) and Python read it alike.
RETENTION_PATTERN_TEXT = "^[1-9][0-9]*[hdw]$"
RETENTION_PATTERN = re.compile(RETENTION_PATTERN_TEXT)
RETENTION_MAX_LENGTH = 8  # the CRD's maxLength (CEL cost); 9999999w at most
RETENTION_DEFAULT = "7d"
RETENTION_UNITS = {"h": 3600, "d": 86400, "w": 604800}


def valid_retention(text: str) -> bool:
    """Whether the CRD would take `text` as spec.backup.retention."""
    return len(text) <= RETENTION_MAX_LENGTH and RETENTION_PATTERN.fullmatch(text) is not None


def retention_seconds(text: str) -> int:
    """How long `text` keeps a backup, in seconds; ValueError for a retention the CRD refuses."""
    if not valid_retention(text):
        raise ValueError(f"{text!r} is not a retention such as 7d, 12h or 4w")
    return int(text[:-1]) * RETENTION_UNITS[text[-1]]
