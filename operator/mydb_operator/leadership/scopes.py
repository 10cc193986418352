"""Scopes: the namespaces an instance manages, as written on its Lease, and whether two overlap. Pure."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

ALL_NAMESPACES = "*"
GLOB_CHARACTERS = "*?["


def scope_of(namespaces: Sequence[str]) -> str:
    """The scope written on the Lease: "*" for all namespaces, else the sorted namespace globs, comma-separated.

    Each -n value is a kopf pattern ("team-*", "a, !a-test", "!kube-*"). Only its
    inclusive globs count: an exclusion only narrows a scope, so ignoring it keeps
    the check conservative. A pattern that starts with an exclusion means every
    namespace but some, hence all namespaces here."""
    globs: set[str] = set()
    for pattern in namespaces:
        parts = [part.strip() for part in pattern.split(",") if part.strip()]
        if not parts or parts[0].startswith("!"):
            return ALL_NAMESPACES
        globs.update(part for part in parts if not part.startswith("!"))
    if not globs or ALL_NAMESPACES in globs:
        return ALL_NAMESPACES
    return ",".join(sorted(globs))


def parse_scope(text: str | None) -> frozenset[str]:
    """The globs of a scope annotation; a missing or empty one counts as all namespaces (conservative)."""
    globs = frozenset(part.strip() for part in (text or "").split(",") if part.strip())
    if not globs or ALL_NAMESPACES in globs:
        return frozenset({ALL_NAMESPACES})
    return globs


def _literal_head(glob: str) -> str:
    cut = min((glob.index(c) for c in GLOB_CHARACTERS if c in glob), default=len(glob))
    return glob[:cut]


def _literal_tail(glob: str) -> str:
    cut = max((glob.rindex(c) for c in GLOB_CHARACTERS + "]" if c in glob), default=-1)
    return glob[cut + 1 :]


def globs_overlap(first: str, second: str) -> bool:
    """Whether some namespace name may match both globs.

    A name (or a glob) that the other glob matches overlaps it. Two globs that do
    not match each other overlap unless their literal starts or ends disagree
    ("team-a-*" and "team-b-*" never meet); otherwise they are taken to overlap,
    which may refuse a pair that could have run together, never the reverse."""
    if fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first):
        return True
    if not (any(c in first for c in GLOB_CHARACTERS) and any(c in second for c in GLOB_CHARACTERS)):
        return False  # a plain name that the other side does not match
    heads, tails = (_literal_head(first), _literal_head(second)), (_literal_tail(first), _literal_tail(second))
    heads_agree = heads[0].startswith(heads[1]) or heads[1].startswith(heads[0])
    tails_agree = tails[0].endswith(tails[1]) or tails[1].endswith(tails[0])
    return heads_agree and tails_agree


def scopes_overlap(first: str, second: str) -> bool:
    """Whether two scopes ("*" or "a,b") may share a namespace; "*" overlaps every scope."""
    return any(globs_overlap(a, b) for a in parse_scope(first) for b in parse_scope(second))


def describe_scope(scope: str) -> str:
    globs = parse_scope(scope)
    if globs == {ALL_NAMESPACES}:
        return "all namespaces"
    return "namespace" + ("s " if len(globs) > 1 else " ") + ", ".join(sorted(globs))
