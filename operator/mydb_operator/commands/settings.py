"""The operator's settings for one command: the environment's (MYDB_*) under the command line's."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from ..config import BUNDLED_CHART, Config
from ..helm import chart_source


def settings(args: argparse.Namespace) -> Config:
    """The environment's settings (MYDB_*) under the command line's; an OCI chart is pulled once, now."""
    config = Config()
    if args.helm:
        config = replace(config, helm=args.helm)
    try:
        source = chart_source.from_settings(
            args.chart, args.chart_version, args.chart_plain_http, os.environ, BUNDLED_CHART
        )
        if args.needs_chart:
            config = replace(config, chart_dir=chart_source.local_chart(source, config.helm))
    except chart_source.ChartSourceError as error:
        raise SystemExit(f"mydb-operator: {error}") from None
    config = replace(config, chart_origin=str(source))
    if args.platform_config:
        config = replace(config, platform_config=Path(args.platform_config))
    if args.command == "run":
        config = replace(config, namespaces=tuple(args.namespace or ()))
        if args.resync is not None:
            config = replace(config, resync_seconds=args.resync)
        if args.metrics_port is not None:
            config = replace(config, metrics_port=args.metrics_port)
    return config
