"""render and values: what the operator would apply for a MyDatabase file, without a cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path
from typing import Any

import yaml

from .. import names
from ..config import Config
from ..desired.platform import Platform, PlatformError
from ..desired.values import database_values, value_keys
from ..helm.errors import HelmError
from ..helm.releases import Helm
from ..model.errors import SpecError
from ..model.spec import parse_spec
from ..policy.volumes import current_size
from .preflight import make_helm, platform


def load_database(path: str) -> dict[str, Any]:
    """The one MyDatabase in a YAML file ('-' for stdin), with a name."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        documents = list(yaml.safe_load_all(text))
    except OSError as error:
        raise SystemExit(f"{path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:  # one line: where, and what the parser expected
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SystemExit(f"{path}: not YAML: {where}{getattr(error, 'problem', None) or error}") from None
    databases = [d for d in documents if isinstance(d, dict) and d.get("kind") == names.KIND]
    if len(databases) != 1:
        raise SystemExit(f"{path}: expected exactly one {names.KIND}, found {len(databases)}")
    name = (databases[0].get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise SystemExit(f"{path}: the {names.KIND} has no metadata.name")
    return databases[0]


def values_for(database: dict[str, Any], loaded: Platform, chart_keys: frozenset[str] | None = None) -> dict[str, Any]:
    """The values the operator passes to Helm; under storageAutoGrow, with the size status.storage shows
    (`kubectl get mydb NAME -o yaml | render -f -` equals what is applied)."""
    try:
        spec = parse_spec(database.get("spec") or {})
        grown = ((database.get("status") or {}).get("storage") or {}).get("size")
        spec = dataclasses.replace(spec, storage=current_size(spec.storage, grown, spec.auto_grow))
        return database_values(database["metadata"]["name"], spec, loaded, chart_keys=chart_keys)
    except (SpecError, PlatformError) as error:
        raise SystemExit(f"invalid {names.KIND}: {error}") from None


def print_values(config: Config) -> None:
    yaml.safe_dump(values_for(load_database(config.manifest), platform(config)), sys.stdout, sort_keys=True)


def print_manifests(config: Config) -> None:
    """The manifests the operator would apply: same values, same chart, same object patches."""
    database = load_database(config.manifest)
    loaded = platform(config)
    namespace = config.render_namespace or database["metadata"].get("namespace") or "default"

    async def rendered(helm: Helm) -> list[dict[str, Any]]:
        values = values_for(database, loaded, value_keys(await helm.default_values()))
        return await helm.template(namespace, database["metadata"]["name"], values)

    try:
        with make_helm(config, loaded) as helm:
            objects = asyncio.run(rendered(helm))
    except HelmError as error:
        raise SystemExit(f"helm template failed: {error}") from None
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False, explicit_start=True)
