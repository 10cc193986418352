"""The namespaces an operator manages: its `-n` values, each a name or a kopf pattern. Pure.

A pattern is comma-separated globs read left to right, as kopf reads them: a
"!" glob excludes, the first inclusive glob makes the initial match, a later
one only brings back a namespace an exclusion took out, and a pattern that
starts with an exclusion starts from every namespace ("team-*",
"a-*, !a-test", "!kube-*"). A namespace is managed when one value matches it;
no value at all: every namespace.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

PATTERN_CHARACTERS = "*?[,!"


def is_pattern(value: str) -> bool:
    """A value that is not a plain namespace name: it needs the namespaces listed to be resolved."""
    return any(character in value for character in PATTERN_CHARACTERS)


def any_pattern(values: Sequence[str]) -> bool:
    return any(is_pattern(value) for value in values)


def _matches(value: str, namespace: str) -> bool:
    matched, initially = False, None
    for index, glob in enumerate(part.strip() for part in value.split(",") if part.strip()):
        if glob.startswith("!"):
            if index == 0:
                matched = initially = True
            if fnmatch.fnmatchcase(namespace, glob[1:]):
                matched = False
        elif initially is None:
            matched = initially = fnmatch.fnmatchcase(namespace, glob)
        elif initially and fnmatch.fnmatchcase(namespace, glob):
            matched = True
    return matched


def managed(values: Sequence[str], namespace: str) -> bool:
    """Whether an operator given these `-n` values manages `namespace`."""
    return not values or any(_matches(value, namespace) for value in values)
