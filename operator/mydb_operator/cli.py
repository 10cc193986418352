"""mydb-operator: run the operator, or show what it would apply for a MyDatabase file."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from . import names
from .config import BUNDLED_CHART, Config
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
    from .handlers.memo import OperatorMemo
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


def platform(config: Config) -> Platform:
    try:
        return load_platform(config.platform_config)
    except PlatformError as error:
        raise SystemExit(f"mydb-operator: platform config: {error}") from None


def make_helm(config: Config, loaded: Platform) -> Helm:
    try:
        return Helm(
            config.chart_dir,
            executable=config.helm,
            history_max=config.history_max,
            max_parallel=config.helm_parallel,
            platform_config=config.platform_config,
            post_render=bool(loaded.object_patches),
        )
    except HelmError as error:
        raise SystemExit(f"mydb-operator: {error}") from None


def values_for(database: dict[str, Any], loaded: Platform) -> dict[str, Any]:
    try:
        return database_values(database["metadata"]["name"], parse_spec(database.get("spec") or {}), loaded)
    except (SpecError, PlatformError) as error:
        raise SystemExit(f"invalid {names.KIND}: {error}") from None


def cmd_values(args: argparse.Namespace, config: Config) -> None:
    yaml.safe_dump(values_for(load_database(args.file), platform(config)), sys.stdout, sort_keys=True)


def cmd_render(args: argparse.Namespace, config: Config) -> None:
    """The manifests the operator would apply: same values, same chart, same object patches."""
    database = load_database(args.file)
    loaded = platform(config)
    values = values_for(database, loaded)
    namespace = args.namespace or database["metadata"].get("namespace") or "default"
    try:
        objects = asyncio.run(make_helm(config, loaded).template(namespace, database["metadata"]["name"], values))
    except HelmError as error:
        raise SystemExit(f"helm template failed: {error}") from None
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False, explicit_start=True)


def prepare_operator(config: Config, runner: asyncio.Runner) -> OperatorMemo:
    """Check the platform config and the chart, once, before kopf starts; fail fast and plainly.

    The Helm and platform checked here are the ones the handlers use (kopf's memo),
    and the check runs on the event loop kopf then runs on."""
    from .handlers.memo import operator_memo

    loaded = platform(config)
    helm = make_helm(config, loaded)
    problems = runner.run(chart_check.incompatibilities(helm, loaded))
    if problems:
        raise SystemExit(
            "mydb-operator: the chart "
            + (config.chart_origin or str(config.chart_dir))
            + " does not fit the operator:\n  "
            + "\n  ".join(problems)
        )
    return operator_memo(config, loaded, helm)


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


def cmd_run(args: argparse.Namespace, config: Config) -> None:
    tune_malloc()  # first: before any thread starts
    import kopf

    from . import handlers  # noqa: F401  (registers the handlers)
    from .leadership.conflicts import ScopeConflict
    from .leadership.identity import default_identity

    with asyncio.Runner() as runner:
        memo = prepare_operator(config, runner)
        logs.configure(args.log_format)
        lease = None
        if args.leader_elect:
            try:
                lease = lead(args, config.namespaces)
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
                loop=runner.get_loop(),
                memo=memo,
                clusterwide=not config.namespaces,
                namespaces=config.namespaces,
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


def lead(args: argparse.Namespace, namespaces: Sequence[str]) -> LeaderLease:
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
        scope=scope_of(namespaces),
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
    args.func(args, settings(args))


if __name__ == "__main__":
    main()
