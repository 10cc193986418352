"""The chart's digest: part of every release hash, so a changed chart makes Helm run again."""

from __future__ import annotations

import hashlib
from pathlib import Path


def chart_digest(chart_dir: Path, object_patches: Path | None = None) -> str:
    """A digest of every file in the chart (and of the object patches), so that a change counts."""
    digest = hashlib.sha256()
    for path in sorted(p for p in chart_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(chart_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    if object_patches is not None:
        digest.update(b"object-patches\0" + Path(object_patches).read_bytes())
    return digest.hexdigest()[:16]
