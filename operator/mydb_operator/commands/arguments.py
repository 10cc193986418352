"""The command line: global flags, then one of run, render, values."""

from __future__ import annotations

import argparse

DESCRIPTION = "mydb-operator: run the operator, or show what it would apply for a MyDatabase file."


def true_or_false(text: str) -> bool:
    """--leader-elect=true|false (and yes/no, on/off, 1/0)."""
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def build_parser() -> argparse.ArgumentParser:
    """The command line; global flags go before the command (charts/mydatabase-operator relies on it)."""
    parser = argparse.ArgumentParser(prog="mydb-operator", description=DESCRIPTION)
    parser.add_argument(
        "--chart", help="chart directory or oci://HOST/PATH/NAME (default: the bundled chart, or MYDB_CHART_DIR)"
    )
    parser.add_argument(
        "--chart-version", help="the version of an oci:// chart, required with one (or MYDB_CHART_VERSION)"
    )
    parser.add_argument(
        "--chart-plain-http",
        action="store_true",
        default=None,
        help="pull an oci:// chart over plain HTTP (or MYDB_CHART_PLAIN_HTTP=1)",
    )
    parser.add_argument("--helm", help="helm executable (default: helm on PATH, or MYDB_HELM)")
    parser.add_argument("--platform-config", help="platform defaults and patches, YAML (or MYDB_PLATFORM_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the operator")
    run.add_argument(
        "-n", "--namespace", action="append", help="watch only this namespace (repeatable); default: all namespaces"
    )
    run.add_argument("--resync", type=float, help="seconds between periodic reconciles (default 60)")
    run.add_argument("--health-port", type=int, default=8080, help="liveness endpoint port (0: off)")
    run.add_argument("--metrics-port", type=int, help="Prometheus /metrics port (default 9090, 0: off)")
    run.add_argument("--log-format", choices=["text", "json"], default="text", help="log line format")
    # nargs="?": a bare --leader-elect (what older charts pass) still means true.
    run.add_argument(
        "--leader-elect",
        type=true_or_false,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="reconcile only while holding a Lease, and refuse to start "
        "beside another instance that manages an overlapping set of namespaces (default: true); "
        "false: nothing stops a second instance",
    )
    run.add_argument(
        "--leader-lease-name",
        default="mydb-operator",
        help="the Lease (default: mydb-operator); instances that name the same Lease stand by for each other",
    )
    run.add_argument(
        "--leader-lease-namespace",
        help="default: POD_NAMESPACE, else the pod's service-account "
        "namespace, else the current kubeconfig context's namespace, else default",
    )
    run.add_argument(
        "--leader-lease-seconds",
        type=int,
        default=15,
        help="a standby takes over this long after the leader stopped renewing",
    )
    run.set_defaults(needs_chart=True)

    render = commands.add_parser("render", help="print the manifests the operator would apply")
    render.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    render.add_argument("--namespace", help="namespace to render for (default: the CR's, else default)")
    render.set_defaults(needs_chart=True)

    values = commands.add_parser("values", help="print the Helm values the operator would pass")
    values.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    values.set_defaults(needs_chart=False)
    return parser
