"""The operator's settings for one command, resolved once: each flag over its environment variable over the
default. The one reader of the command line's flags and of the environment (docs/install.md, Settings)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from ..config import Config, SettingError, parse_bool
from ..helm import chart_source
from ..leadership.identity import default_identity, pod_namespace

T = TypeVar("T")
# The commands that render the chart; `values` needs none, so an OCI chart is not pulled for it.
CHART_COMMANDS = frozenset({"run", "render"})


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """The settings of the command `args` names: every flag given, else its environment variable (MYDB_*;
    set but empty counts as unset), else the default. An OCI chart is pulled once, now, for a command that
    renders it. Raises SettingError, naming the flag or variable, for a value that cannot be used."""
    given = _Given(args, environ)
    command = str(args.command)
    chart = given.text("chart", "MYDB_CHART_DIR") or Config.chart
    version = given.text("chart_version", "MYDB_CHART_VERSION")
    plain_http = given.value("--chart-plain-http", "chart_plain_http", "MYDB_CHART_PLAIN_HTTP", parse_bool, False)
    helm = given.text("helm", "MYDB_HELM") or Config.helm
    platform_config = given.text("platform_config", "MYDB_PLATFORM_CONFIG")
    try:
        source = chart_source.from_settings(chart, version, plain_http)
    except chart_source.ChartSourceError as error:
        raise SettingError(str(error)) from None
    config = Config(
        command=command,
        chart=source.location,
        chart_version=source.version,
        chart_plain_http=source.plain_http,
        chart_dir=None if source.is_oci else Path(source.location),
        chart_origin=str(source),
        helm=helm,
        platform_config=Path(platform_config) if platform_config else None,
        environment=dict(environ),
        namespaces=tuple(args.namespace or ()) if command == "run" else (),
        resync_seconds=given.value("--resync", "resync", "MYDB_RESYNC_SECONDS", seconds, Config.resync_seconds),
        metrics_port=given.value("--metrics-port", "metrics_port", "MYDB_METRICS_PORT", port, Config.metrics_port),
        health_port=given.value("--health-port", "health_port", None, port, Config.health_port),
        log_format=given.text("log_format", None) or Config.log_format,
        helm_parallel=given.value(
            "--helm-parallel", "helm_parallel", "MYDB_HELM_PARALLEL", at_least(1), Config.helm_parallel
        ),
        rollout_window=given.value(
            "--rollout-window", "rollout_window", "MYDB_ROLLOUT_WINDOW", at_least(0), Config.rollout_window
        ),
        leader_elect=given.value("--leader-elect", "leader_elect", None, parse_bool, Config.leader_elect),
        leader_lease_name=given.text("leader_lease_name", None) or Config.leader_lease_name,
        leader_lease_namespace=given.text("leader_lease_namespace", "POD_NAMESPACE"),
        leader_lease_seconds=given.value(
            "--leader-lease-seconds", "leader_lease_seconds", None, at_least(1), Config.leader_lease_seconds
        ),
        identity=default_identity(environ.get("POD_NAME") or None),
        operator_namespace=pod_namespace(environ.get("POD_NAMESPACE") or None) if command == "run" else None,
        manifest=str(getattr(args, "file", None) or Config.manifest),
        render_namespace=(args.namespace or None) if command == "render" else None,
    )
    if source.is_oci and command in CHART_COMMANDS:  # last: only once every other setting is known to be good
        try:
            config = replace(config, chart_dir=chart_source.fetch(source, helm, config.environment))
        except chart_source.ChartSourceError as error:
            raise SettingError(str(error)) from None
    return config


class _Given:
    """One setting at a time: the flag's value if given, else the variable's if set and not empty."""

    def __init__(self, args: argparse.Namespace, environ: Mapping[str, str]):
        self.args, self.environ = args, environ

    def text(self, dest: str, variable: str | None) -> str | None:
        value = getattr(self.args, dest, None)
        if value is not None and str(value).strip():
            return str(value)
        text = self.environ.get(variable, "") if variable else ""
        return text if text.strip() else None

    def value(self, flag: str, dest: str, variable: str | None, parse: Callable[[str, str], T], default: T) -> T:
        """The flag's value (argparse gave its type; checked again by `parse`), else the variable's, else
        `default`. `parse(name, text)` reads one value and names the flag or variable when it refuses it."""
        value = getattr(self.args, dest, None)
        if value is not None:
            return parse(flag, str(value))
        text = self.environ.get(variable, "") if variable else ""
        return parse(variable, text) if variable and text.strip() else default


def number(name: str, text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text.strip())
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise SettingError(f"{name}={text!r}: expected {what}") from None
    if not math.isfinite(value):
        raise SettingError(f"{name}={text!r}: expected a finite number")
    return value


def seconds(name: str, text: str) -> float:
    value = number(name, text, float)
    if value <= 0:
        raise SettingError(f"{name}={text!r}: expected a number of seconds above 0")
    return value


def port(name: str, text: str) -> int:
    value = int(number(name, text, int))
    if not 0 <= value <= 65535:
        raise SettingError(f"{name}={text!r}: expected a port from 1 to 65535, or 0 for none")
    return value


def at_least(least: int) -> Callable[[str, str], int]:
    def whole(name: str, text: str) -> int:
        value = int(number(name, text, int))
        if value < least:
            raise SettingError(f"{name}={text!r}: expected a whole number, at least {least}")
        return value

    return whole
