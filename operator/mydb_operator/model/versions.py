"""The PostgreSQL majors the operator supports: the one list (a test holds the CRD to it)."""

from __future__ import annotations

import re

SUPPORTED_MAJORS = range(13, 18)
# MAJOR.MINOR, minor 0 to 99 without a leading zero: the CRD's `pattern`, from the same majors.
VERSION_PATTERN = re.compile(r"^(" + "|".join(str(m) for m in SUPPORTED_MAJORS) + r")\.(0|[1-9][0-9]?)$")


def major(version: str) -> int:
    return int(version.split(".")[0])


def supported_range() -> str:
    """The supported majors in words, as messages say them: "13.x to 17.x"."""
    return f"{SUPPORTED_MAJORS[0]}.x to {SUPPORTED_MAJORS[-1]}.x"


def server_version(version_num: int) -> str:
    """A server's server_version_num as MAJOR.MINOR (150014 is 15.14): what it runs, whatever the image's tag."""
    return f"{version_num // 10000}.{version_num % 10000}"
