"""The command line: global flags, then one of run, render, values.

Every flag defaults to None (not given): commands/settings.py resolves each one
over its environment variable and the default, in one place (docs/install.md,
Settings, lists them all)."""

from __future__ import annotations

import argparse

from ..config import BOOL_EXPECTED, LOG_FORMATS, Config, SettingError, parse_bool

DESCRIPTION = "mydb-operator: run the operator, or show what it would apply for a MyDatabase file."


def true_or_false(text: str) -> bool:
    """--leader-elect=true|false: the words of every yes/no setting (config.parse_bool)."""
    try:
        return parse_bool("", text)
    except SettingError:
        raise argparse.ArgumentTypeError(f"{text!r}: {BOOL_EXPECTED}") from None


def build_parser() -> argparse.ArgumentParser:
    """The command line; global flags go before the command (charts/mydatabase-operator relies on it)."""
    parser = argparse.ArgumentParser(prog="mydb-operator", description=DESCRIPTION)
    parser.add_argument(
        "--chart", help="chart directory or oci://HOST/PATH/NAME (or MYDB_CHART_DIR; default: the bundled chart)"
    )
    parser.add_argument(
        "--chart-version", help="the version of an oci:// chart, required with one (or MYDB_CHART_VERSION)"
    )
    parser.add_argument(
        "--chart-plain-http",
        action="store_true",
        default=None,
        help="pull an oci:// chart over plain HTTP (or MYDB_CHART_PLAIN_HTTP=true)",
    )
    parser.add_argument("--helm", help=f"helm executable (or MYDB_HELM; default: {Config.helm} on PATH)")
    parser.add_argument("--platform-config", help="platform defaults and patches, YAML (or MYDB_PLATFORM_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the operator")
    run.add_argument(
        "-n", "--namespace", action="append", help="watch only this namespace (repeatable); default: all namespaces"
    )
    run.add_argument(
        "--resync",
        type=float,
        help=f"seconds between periodic reconciles (or MYDB_RESYNC_SECONDS; default {Config.resync_seconds:g})",
    )
    run.add_argument("--health-port", type=int, help=f"liveness endpoint port (default {Config.health_port}, 0: off)")
    run.add_argument(
        "--metrics-port",
        type=int,
        help=f"Prometheus /metrics port (or MYDB_METRICS_PORT; default {Config.metrics_port}, 0: off)",
    )
    run.add_argument("--log-format", choices=LOG_FORMATS, help=f"log line format (default {Config.log_format})")
    run.add_argument(
        "--helm-parallel",
        type=int,
        help=f"Helm runs at once (or MYDB_HELM_PARALLEL; default {Config.helm_parallel})",
    )
    run.add_argument(
        "--rollout-window",
        type=int,
        help="new databases rolling out at once "
        f"(or MYDB_ROLLOUT_WINDOW; default {Config.rollout_window}, 0: no pacing)",
    )
    # nargs="?": a bare --leader-elect (what older charts pass) still means true.
    run.add_argument(
        "--leader-elect",
        type=true_or_false,
        nargs="?",
        const=True,
        metavar="true|false",
        help="reconcile only while holding a Lease, and refuse to start "
        "beside another instance that manages an overlapping set of namespaces (default: true); "
        "false: nothing stops a second instance",
    )
    run.add_argument(
        "--leader-lease-name",
        help=f"the Lease (default: {Config.leader_lease_name}); "
        "instances that name the same Lease stand by for each other",
    )
    run.add_argument(
        "--leader-lease-namespace",
        help="default: POD_NAMESPACE, else the pod's service-account "
        "namespace, else the current kubeconfig context's namespace, else default",
    )
    run.add_argument(
        "--leader-lease-seconds",
        type=int,
        help="a standby takes over this long after the leader stopped renewing "
        f"(default {Config.leader_lease_seconds})",
    )

    render = commands.add_parser("render", help="print the manifests the operator would apply")
    render.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    render.add_argument("--namespace", help="namespace to render for (default: the CR's, else default)")

    values = commands.add_parser("values", help="print the Helm values the operator would pass")
    values.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    return parser
