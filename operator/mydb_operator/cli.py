"""mydb-operator: run the operator, or show what it would apply for a MyDatabase file."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from . import names
from .config import BUNDLED_CHART, CONFIG
from .desired.platform import Platform, PlatformError, load_platform
from .desired.values import database_values
from .helm import chart_check, chart_source
from .helm.errors import HelmError
from .helm.releases import Helm
from .memory import tune_malloc
from .model.errors import SpecError
from .model.spec import parse_spec
from .telemetry import logs

if TYPE_CHECKING:
    from .leadership.lease import LeaderLease

# Not __name__: run as `python -m mydb_operator.cli`, this module is __main__.
log = logging.getLogger("mydb_operator.cli")


def load_database(path: str) -> dict[str, Any]:
    """The one MyDatabase in a YAML file ('-' for stdin)."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    documents = [d for d in yaml.safe_load_all(text) if d]
    databases: list[dict[str, Any]] = [d for d in documents if d.get("kind") == names.KIND]
    if len(databases) != 1:
        raise SystemExit(f"{path}: expected exactly one {names.KIND}, found {len(databases)}")
    return databases[0]


def platform() -> Platform:
    try:
        return load_platform(CONFIG.platform_config)
    except PlatformError as error:
        raise SystemExit(f"mydb-operator: platform config: {error}") from None


def make_helm(loaded: Platform) -> Helm:
    try:
        return Helm(
            CONFIG.chart_dir,
            executable=CONFIG.helm,
            platform_config=CONFIG.platform_config,
            post_render=bool(loaded.object_patches),
        )
    except HelmError as error:
        raise SystemExit(f"mydb-operator: {error}") from None


def values_for(database: dict[str, Any], loaded: Platform) -> dict[str, Any]:
    try:
        return database_values(database["metadata"]["name"], parse_spec(database.get("spec") or {}), loaded)
    except (SpecError, PlatformError) as error:
        raise SystemExit(f"invalid {names.KIND}: {error}") from None


def cmd_values(args: argparse.Namespace) -> None:
    yaml.safe_dump(values_for(load_database(args.file), platform()), sys.stdout, sort_keys=True)


def cmd_render(args: argparse.Namespace) -> None:
    """The manifests the operator would apply: same values, same chart, same object patches."""
    database = load_database(args.file)
    loaded = platform()
    values = values_for(database, loaded)
    namespace = args.namespace or database["metadata"].get("namespace") or "default"
    try:
        objects = asyncio.run(make_helm(loaded).template(namespace, database["metadata"]["name"], values))
    except HelmError as error:
        raise SystemExit(f"helm template failed: {error}") from None
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False, explicit_start=True)


def preflight(chart: str) -> None:
    """Fail fast and plainly, before kopf starts: helm, chart and platform config must work together."""
    loaded = platform()
    problems = asyncio.run(chart_check.incompatibilities(make_helm(loaded), loaded))
    if problems:
        raise SystemExit(
            "mydb-operator: the chart " + chart + " does not fit the operator:\n  " + "\n  ".join(problems)
        )


def use_chart(args: argparse.Namespace) -> str:
    """Settle the chart: a directory, or an OCI chart pulled once now. Returns how to name it in messages."""
    try:
        source = chart_source.from_settings(
            args.chart, args.chart_version, args.chart_plain_http, os.environ, BUNDLED_CHART
        )
        if args.needs_chart:
            CONFIG.chart_dir = chart_source.local_chart(source, CONFIG.helm)
    except chart_source.ChartSourceError as error:
        raise SystemExit(f"mydb-operator: {error}") from None
    return str(source)


def cmd_run(args: argparse.Namespace) -> None:
    tune_malloc()  # first: before any thread starts
    import kopf

    from . import handlers  # noqa: F401  (registers the handlers)
    from .leadership.conflicts import ScopeConflict
    from .leadership.identity import default_identity

    preflight(args.chart_label)
    CONFIG.namespaces = args.namespace or []
    if args.resync is not None:
        CONFIG.resync_seconds = args.resync
    if args.metrics_port is not None:
        CONFIG.metrics_port = args.metrics_port
    logs.configure(args.log_format)
    lease = None
    if args.leader_elect:
        try:
            lease = lead(args)
        except ScopeConflict as conflict:
            log.error("%s", conflict)
            raise SystemExit(2) from None
    else:
        log.warning(
            "leader election is off (--leader-elect=false): nothing stops a second mydb-operator "
            "instance from acting on the same databases at the same time; make sure only one runs"
        )
    try:
        kopf.run(
            clusterwide=not CONFIG.namespaces,
            namespaces=CONFIG.namespaces,
            standalone=True,
            # kopf's own default asks the passwd database for the user name,
            # and the image's numeric user has no entry there. (kopf types it as
            # its own NewType of str, which it does not export.)
            identity=cast(Any, default_identity()),
            liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz" if args.health_port else None,
        )
    finally:
        if lease is not None:
            lease.release()


def lead(args: argparse.Namespace) -> LeaderLease:
    """Block until this instance holds the Lease (answering /healthz meanwhile); exit when it loses it.

    Raises ScopeConflict when another live instance, under another Lease, manages
    namespaces this one would manage too."""
    from .cluster.clients import load_config
    from .leadership import lease as election
    from .leadership.conflicts import ScopeConflict
    from .leadership.identity import default_identity, default_namespace
    from .leadership.scopes import scope_of
    from .leadership.standby_health import standby_health

    load_config()
    lease = election.LeaderLease(
        args.leader_lease_namespace or default_namespace(),
        args.leader_lease_name,
        default_identity(),
        duration=args.leader_lease_seconds,
        scope=scope_of(CONFIG.namespaces),
    )
    with standby_health(args.health_port, lease.standby_status):
        lease.refuse_overlap()  # a second instance fails at once instead of standing by for the wrong Lease
        lease.acquire()
        try:
            lease.refuse_overlap()  # two that started at the same moment: each now sees the other's Lease
        except ScopeConflict:
            lease.release()
            raise
    lease.keep(on_lost=lambda: os._exit(1))  # a standby takes over; the Deployment restarts this one
    return lease


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
    parser = argparse.ArgumentParser(prog="mydb-operator", description=__doc__)
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
    run.set_defaults(func=cmd_run, needs_chart=True)

    render = commands.add_parser("render", help="print the manifests the operator would apply")
    render.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    render.add_argument("--namespace", help="namespace to render for (default: the CR's, else default)")
    render.set_defaults(func=cmd_render, needs_chart=True)

    values = commands.add_parser("values", help="print the Helm values the operator would pass")
    values.add_argument("-f", "--file", required=True, help="a MyDatabase YAML file, or - for stdin")
    values.set_defaults(func=cmd_values, needs_chart=False)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.helm:
        CONFIG.helm = args.helm
    args.chart_label = use_chart(args)
    if args.platform_config:
        CONFIG.platform_config = Path(args.platform_config)
    args.func(args)


if __name__ == "__main__":
    main()
