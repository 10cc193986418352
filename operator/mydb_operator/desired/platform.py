"""Platform customization: defaults for every database, and patches for what values do not expose.

Precedence, lowest first: chart defaults < platform `values` < the MyDatabase
< platform `valuePatches` (RFC 6902 on the values) < platform `objectPatches`
(RFC 6902 on rendered objects, applied by a Helm post-renderer). The config is
one YAML file (`--platform-config`, mounted from the operator chart's
`platform` value):

    values: {image: {registry: mirror.example.com}, nodeSelector: {pool: db}}
    valuePatches: [{op: replace, path: /image/pullPolicy, value: Always}]
    objectPatches:
      - target: {kind: StatefulSet, name: "*"}
        patch: [{op: add, path: /spec/template/spec/priorityClassName, value: databases}]
    deniedParameters: [shared_preload_libraries]
    majors: [15, 17]   # the PostgreSQL majors the platform has images for (default: every supported one)
    imageDigests: {"15.2": "sha256:…", "17.6": "sha256:…"}   # pinned images: only these versions run
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from ..model.versions import SUPPORTED_MAJORS, VERSION_PATTERN, major
from .parameters import DENIED_PARAMETERS

DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")


class PlatformError(ValueError):
    """The platform config is unusable; the operator refuses to start with it."""


@dataclass(frozen=True)
class ObjectPatch:
    kind: str
    name: str  # a glob, e.g. "*" or "*-backup"
    patch: jsonpatch.JsonPatch

    def matches(self, obj: dict[str, Any]) -> bool:
        return obj.get("kind") == self.kind and fnmatch.fnmatchcase(obj.get("metadata", {}).get("name", ""), self.name)


@dataclass(frozen=True)
class Platform:
    values: dict[str, Any] = field(default_factory=dict)
    value_patches: jsonpatch.JsonPatch = field(default_factory=lambda: jsonpatch.JsonPatch([]))
    object_patches: tuple[ObjectPatch, ...] = ()
    denied_parameters: frozenset[str] = DENIED_PARAMETERS
    majors: tuple[int, ...] = tuple(SUPPORTED_MAJORS)  # those it has images for
    image_digests: dict[str, str] = field(default_factory=dict)  # version -> digest; set: only these run
    source: dict[str, Any] = field(default_factory=dict)  # as written, for the post-renderer's file


def _patch(where: str, operations: Any) -> jsonpatch.JsonPatch:
    if not isinstance(operations, list):
        raise PlatformError(f"{where}: must be a list of RFC 6902 operations")
    try:
        return jsonpatch.JsonPatch(operations)  # checks each operation: unknown ops, bad paths
    except (jsonpatch.InvalidJsonPatch, jsonpatch.JsonPointerException, TypeError, KeyError) as error:
        raise PlatformError(f"{where}: {error}") from None


def parse_platform(config: dict[str, Any] | None) -> Platform:
    """Check every part of the config up front: a bad patch stops the operator, never half-applies."""
    config = config or {}
    unknown = set(config) - {"values", "valuePatches", "objectPatches", "deniedParameters", "majors", "imageDigests"}
    if unknown:
        raise PlatformError(f"unknown keys in the platform config: {', '.join(sorted(unknown))}")
    values = config.get("values") or {}
    if not isinstance(values, dict):
        raise PlatformError("values: must be a mapping of chart values")
    object_patches = []
    for index, entry in enumerate(config.get("objectPatches") or []):
        where = f"objectPatches[{index}]"
        target = (entry or {}).get("target") or {}
        if not target.get("kind"):
            raise PlatformError(f"{where}.target.kind: required (for example StatefulSet)")
        object_patches.append(
            ObjectPatch(target["kind"], target.get("name", "*"), _patch(f"{where}.patch", entry.get("patch")))
        )
    denied = config.get("deniedParameters") or []
    if not isinstance(denied, list) or not all(isinstance(name, str) for name in denied):
        raise PlatformError("deniedParameters: must be a list of parameter names")
    majors = config.get("majors", list(SUPPORTED_MAJORS))
    if not isinstance(majors, list) or not majors or not all(m in SUPPORTED_MAJORS for m in majors):
        supported = ", ".join(str(m) for m in SUPPORTED_MAJORS)
        raise PlatformError(f"majors: must be a non-empty list of supported majors ({supported}), got {majors!r}")
    digests = parse_image_digests(config.get("imageDigests") or {}, majors)
    return Platform(
        values=copy.deepcopy(values),
        majors=tuple(sorted(set(majors))),
        image_digests=digests,
        value_patches=_patch("valuePatches", config.get("valuePatches") or []),
        object_patches=tuple(object_patches),
        denied_parameters=DENIED_PARAMETERS | frozenset(denied),
        source=copy.deepcopy(config),
    )


def parse_image_digests(pins: Any, majors: list[int]) -> dict[str, str]:
    """imageDigests: MAJOR.MINOR -> sha256 digest, each of an offered major."""
    if not isinstance(pins, dict):
        raise PlatformError('imageDigests: must map versions to digests, e.g. {"15.2": "sha256:<64 hex>"}')
    for version, digest in pins.items():
        if not isinstance(version, str) or not VERSION_PATTERN.match(version):
            raise PlatformError(f"imageDigests: {version!r} is not a MAJOR.MINOR version (quote it in YAML)")
        if major(version) not in majors:
            raise PlatformError(f"imageDigests: {version} is of a major the platform does not offer (majors)")
        if not isinstance(digest, str) or not DIGEST_PATTERN.match(digest):
            raise PlatformError(f"imageDigests.{version}: must be sha256:<64 lowercase hex>, got {digest!r}")
    unpinned_majors = sorted(set(majors) - {major(version) for version in pins}) if pins else []
    if unpinned_majors:
        listed = ", ".join(str(m) for m in unpinned_majors)
        raise PlatformError(
            f"imageDigests: majors offers {listed} but no version of it is pinned: pin one, or take it out of majors"
        )
    return dict(pins)


def load_platform(path: Path | None) -> Platform:
    if path is None:
        return Platform()
    try:
        return parse_platform(yaml.safe_load(Path(path).read_text()))
    except (OSError, yaml.YAMLError) as error:
        raise PlatformError(f"cannot read the platform config {path}: {error}") from None


def merge(lower: Any, higher: Any) -> Any:
    """Deep-merge mappings, `higher` winning; any other value (lists too) is replaced whole."""
    if isinstance(lower, dict) and isinstance(higher, dict):
        merged = dict(lower)
        for key, value in higher.items():
            merged[key] = merge(lower.get(key), value)
        return merged
    return copy.deepcopy(higher)


# The operator chart's pods (charts/mydatabase-operator): what the databases' NetworkPolicy admits as the operator.
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "mydatabase-operator"}


def admitting_operator(platform: Platform, namespace: str | None) -> Platform:
    """The databases' NetworkPolicy admits this operator's pods in NAMESPACE, where it runs (None: outside the
    cluster, where it connects from its node, which NetworkPolicy does not restrict), unless the platform
    names the operator's peers itself (networkPolicy.operator)."""
    if not namespace or "operator" in (platform.values.get("networkPolicy") or {}):
        return platform
    peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)},
    }
    return dataclasses.replace(platform, values=merge(platform.values, {"networkPolicy": {"operator": [peer]}}))


def apply_values(platform: Platform, database_values: dict[str, Any]) -> dict[str, Any]:
    """Platform defaults under the database's values, then the platform's value patches on top."""
    merged = merge(platform.values, database_values)
    try:
        patched: dict[str, Any] = platform.value_patches.apply(merged)
        return patched
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        reason = str(error).split(" in {", 1)[0]  # jsonpatch appends the whole document
        raise PlatformError(f"valuePatches do not apply to this database's values: {reason}") from None


def patch_objects(patches: tuple[ObjectPatch, ...], documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply every matching object patch; any failure fails the whole render (nothing half-patched)."""
    patched = []
    for document in documents:
        for index, entry in enumerate(patches):
            if document and entry.matches(document):
                try:
                    document = entry.patch.apply(document)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
                    name = document.get("metadata", {}).get("name")
                    raise PlatformError(
                        f"objectPatches[{index}] does not apply to {document['kind']} {name}: {error}"
                    ) from None
        patched.append(document)
    return patched


def unoffered(platform: Platform, major: int) -> str | None:
    """Why the platform cannot run MAJOR (it has no image for it), or None: said before any pod fails to pull."""
    if major in platform.majors:
        return None
    offered = ", ".join(str(m) for m in platform.majors)
    return f"PostgreSQL {major} is not offered by this platform, which has images for {offered}"


def unpinned(platform: Platform, version: str) -> str | None:
    """Why VERSION cannot run on a platform that pins its images by digest (none pinned for it), or None."""
    if not platform.image_digests or version in platform.image_digests:
        return None
    pinned = ", ".join(sorted(platform.image_digests, key=lambda v: tuple(int(p) for p in v.split("."))))
    return f"PostgreSQL {version} has no pinned image on this platform, which pins {pinned}"


def probe_version(platform: Platform, offered: int) -> str:
    """A version of major OFFERED the platform can run, for rendering the chart at start-up."""
    pinned = [v for v in platform.image_digests if major(v) == offered]
    return min(pinned, key=lambda v: int(v.split(".")[1])) if pinned else f"{offered}.0"


def denied(platform: Platform, parameters: Mapping[str, str]) -> list[str]:
    return sorted(name for name in parameters if name.lower() in platform.denied_parameters)
