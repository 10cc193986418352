"""The servers' port comes from one place: the values the operator renders (desired/values.postgres_port).

A platform that sets the chart's postgresql.port gets that port in status.endpoints, in the credentials
Secret's URIs and in the operator's own connections to the pods; the start-up check takes it from its
render (helm/chart_check.py) and refuses a chart whose Services serve another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from fake_api import FakeApi, FakeHelm, make_runtime, run, running

from mydb_operator import names
from mydb_operator.desired.credentials import credentials_secret
from mydb_operator.desired.platform import Platform, parse_platform
from mydb_operator.desired.values import database_values, postgres_port
from mydb_operator.helm.chart_check import check_chart, port_problems
from mydb_operator.model.observation import Observation
from mydb_operator.model.spec import parse_spec
from mydb_operator.reconcile.acting import act
from mydb_operator.reconcile.outcomes import Target
from mydb_operator.reconcile.planning import decide
from mydb_operator.reconcile.runtime import Runtime
from mydb_operator.reconcile.servers import Servers
from mydb_operator.status.build import Happened, Wanted, build_status

CHART_DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[2] / "charts/mydatabase/values.yaml").read_text())
SPEC = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi", "postgresql": {"parameters": {"work_mem": "8MB"}}})
PLATFORM = parse_platform({"values": {"postgresql": {"port": 6543}}})
PATCHED = parse_platform({"values": {"postgresql": {"port": 6543}},
                          "valuePatches": [{"op": "replace", "path": "/postgresql/port", "value": 7000}]})


def runtime_on(port: int, platform: Platform = PLATFORM, helm: FakeHelm | None = None,
               api: FakeApi | None = None) -> Runtime:
    return make_runtime(helm or FakeHelm(), platform, api=api, port=port)


def test_the_port_is_the_rendered_values_else_the_charts_default() -> None:
    assert postgres_port(database_values("db", SPEC, Platform())) == names.POSTGRES_PORT == 5432
    values = database_values("db", SPEC, PLATFORM)
    assert values["postgresql"] == {"port": 6543, "parameters": {"work_mem": "8MB"}}  # the spec's beside it
    assert postgres_port(values) == 6543
    assert postgres_port(database_values("db", SPEC, PATCHED)) == 7000  # valuePatches come last
    assert postgres_port({}, chart_default=15432) == 15432  # a platform's own chart with another default
    assert postgres_port({"postgresql": {"port": True}}) == 5432  # not a port


def test_a_platform_port_is_in_the_endpoints_the_uris_and_the_connections() -> None:
    port = postgres_port(database_values("db", SPEC, PLATFORM))
    status = build_status(Wanted("db", "ns", 1, SPEC, port), Happened(Observation()), {}, "2026-01-01T00:00:00Z")
    assert status["endpoints"] == {"primary": "db.ns.svc:6543", "replicas": "db-ro.ns.svc:6543"}
    data = credentials_secret("ns", "db", port)["stringData"]
    assert (urlsplit(data["uri"]).port, urlsplit(data["uri-ro"]).port) == (6543, 6543)
    assert urlsplit(data["uri"]).hostname == "db.ns.svc"
    pods = [{"metadata": {"name": "db-0"}, "status": {"podIP": "10.0.0.7"}}]
    server = Servers("ns", "db", SPEC, runtime_on(port)).server(pods, "db-0")
    assert server is not None and (server.address, server.port) == ("10.0.0.7", 6543)


def test_a_first_install_on_another_port_says_it_everywhere(api: FakeApi) -> None:
    """Through the reconcile's own steps: the Secret the first install creates, the values Helm gets."""
    helm = FakeHelm()
    runtime = runtime_on(6543, helm=helm, api=api)
    target = Target("ns", "db", SPEC, None, None)
    api.observations[("ns", "db")] = running()

    async def both() -> None:
        await act(target, Observation(), await decide(target, Observation(), runtime), runtime)

    run(both())
    secret = api.secrets[("ns", names.credentials_secret_name("db"))]["stringData"]
    assert urlsplit(secret["uri"]).port == urlsplit(secret["uri-ro"]).port == 6543
    [(_, _, values)] = helm.upgrades
    assert postgres_port(values) == runtime.port


class RenderingHelm:
    """`helm template` of a chart that serves postgresql.port on its Services (or a fixed port: `serves`)."""

    def __init__(self, serves: int | None = None) -> None:
        self.serves = serves

    async def default_values(self) -> dict[str, Any]:
        return CHART_DEFAULTS

    async def template(self, namespace: str, release: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        port = self.serves or postgres_port(values, CHART_DEFAULTS["postgresql"]["port"])
        statefulset = {"kind": "StatefulSet", "metadata": {"name": release},
                       "spec": {"selector": {"matchLabels": names.selector_labels(release)},
                                "template": {"spec": {"containers": [{"name": names.POSTGRES_CONTAINER}]}},
                                "volumeClaimTemplates": [{"metadata": {"name": names.DATA_CLAIM_TEMPLATE}}]}}
        services = [{"kind": "Service", "metadata": {"name": s}, "spec": {"ports": [{"port": port}]}}
                    for s in names.release_services(release)]
        return [statefulset, *services, {"kind": "CronJob", "metadata": {"name": names.backup_cronjob(release)}}]


def test_the_start_up_check_keeps_the_port_of_its_render() -> None:
    fit = asyncio.run(check_chart(RenderingHelm(), PLATFORM))  # type: ignore[arg-type]
    assert (fit.problems, fit.port) == ([], 6543)
    assert asyncio.run(check_chart(RenderingHelm(), Platform())).port == 5432  # type: ignore[arg-type]
    assert asyncio.run(check_chart(RenderingHelm(), PATCHED)).port == 7000  # type: ignore[arg-type]


def test_the_start_up_check_renders_only_the_majors_the_platform_offers() -> None:
    """A platform with images for 15 and 17 only: 13, 14 and 16 are refused per database, not at start-up."""
    class Counting(RenderingHelm):
        tags: list[str] = []

        async def template(self, namespace: str, release: str, values: dict[str, Any]) -> list[dict[str, Any]]:
            self.tags.append(values["image"]["tag"])
            return await super().template(namespace, release, values)

    helm = Counting()
    fit = asyncio.run(check_chart(helm, parse_platform({"majors": [15, 17]})))  # type: ignore[arg-type]
    assert (fit.problems, helm.tags) == ([], ["15.0", "17.0"])
    pins = {"15.4": "sha256:" + "4" * 64, "15.2": "sha256:" + "2" * 64, "17.6": "sha256:" + "6" * 64}
    helm.tags.clear()
    fit = asyncio.run(check_chart(helm, parse_platform({"majors": [15, 17], "imageDigests": pins})))  # type: ignore[arg-type]
    assert (fit.problems, helm.tags) == ([], ["15.2", "17.6"])  # a version each major pins


def test_the_start_up_check_refuses_services_on_another_port() -> None:
    """A chart (or an object patch) whose Services ignore postgresql.port: the endpoints and URIs would lie."""
    fit = asyncio.run(check_chart(RenderingHelm(serves=5432), PLATFORM))  # type: ignore[arg-type]
    assert fit.problems and all("serves port(s) 5432, not postgresql.port 6543" in p for p in fit.problems)
    service = {"kind": "Service", "metadata": {"name": "db"}, "spec": {"ports": [{"port": 6543}]}}
    assert port_problems([service], "db", 6543) == []
    assert port_problems([{**service, "spec": {}}], "db", 6543) == [
        "the Service db serves port(s) none, not postgresql.port 6543 as the values give it"]
