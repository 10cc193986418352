"""Operator settings: the environment's (MYDB_*) defaults, which the command line overrides.

The CLI builds one Config and passes it on (to the start-up check, then to the
handlers through kopf's memo); nothing reads settings from a global."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# The bundled chart, found beside the package in a checkout or an image built from it.
BUNDLED_CHART = Path(__file__).resolve().parents[2] / "charts" / "mydatabase"


@dataclass(frozen=True)
class Config:
    chart_dir: Path = field(default_factory=lambda: Path(os.environ.get("MYDB_CHART_DIR", BUNDLED_CHART)))
    # How messages name the chart: its directory, or oci://HOST/PATH/NAME version V it was pulled from.
    chart_origin: str = ""
    helm: str = field(default_factory=lambda: os.environ.get("MYDB_HELM", "helm"))
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    resync_seconds: float = field(default_factory=lambda: float(os.environ.get("MYDB_RESYNC_SECONDS", "60")))
    helm_parallel: int = field(default_factory=lambda: int(os.environ.get("MYDB_HELM_PARALLEL", "2")))
    # New databases rolling out at once (reconcile/pacing.py); 0 turns pacing off.
    rollout_window: int = field(default_factory=lambda: int(os.environ.get("MYDB_ROLLOUT_WINDOW", "16")))
    history_max: int = 5
    platform_config: Path | None = field(
        default_factory=lambda: (
            Path(os.environ["MYDB_PLATFORM_CONFIG"]) if os.environ.get("MYDB_PLATFORM_CONFIG") else None
        )
    )
    metrics_port: int = field(default_factory=lambda: int(os.environ.get("MYDB_METRICS_PORT", "9090")))
