"""Where the chart comes from: a directory, or an OCI reference and version pulled once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mydb_operator import cli
from mydb_operator.commands.arguments import build_parser
from mydb_operator.commands.settings import load
from mydb_operator.config import BUNDLED_CHART, SettingError
from mydb_operator.helm import chart_source
from mydb_operator.helm.chart_source import ChartSource, ChartSourceError
from mydb_operator.helm.errors import last_line

BUNDLED = BUNDLED_CHART
REF = "oci://127.0.0.1:16400/charts/mydatabase"


def settings(chart: str | None = None, version: str | None = None, plain_http: bool = False,
             **environ: str) -> ChartSource:
    """The chart source the settings loader resolves from these flags over this environment
    (for `values`, which pulls nothing)."""
    argv = [*(["--chart", chart] if chart else []), *(["--chart-version", version] if version else []),
            *(["--chart-plain-http"] if plain_http else []), "values", "-f", "-"]
    config = load(build_parser().parse_args(argv), environ)
    return ChartSource(config.chart, config.chart_version, config.chart_plain_http)


# ------------------------------------------------------------------ argv


def test_pull_argv_pulls_exactly_that_version_unpacked_into_the_directory() -> None:
    source = ChartSource(REF, "0.1.0")
    assert chart_source.pull_argv("/bin/helm", source, Path("/cache/x")) == [
        "/bin/helm", "pull", REF, "--version", "0.1.0", "--untar", "--untardir", "/cache/x"]


def test_pull_argv_over_plain_http() -> None:
    argv = chart_source.pull_argv("helm", ChartSource(REF, "0.1.0", plain_http=True), Path("/d"))
    assert argv[-1] == "--plain-http" and argv.count("--plain-http") == 1


def test_pull_argv_refuses_a_directory_or_a_missing_version() -> None:
    with pytest.raises(ValueError):
        chart_source.pull_argv("helm", ChartSource("/charts/mydatabase"), Path("/d"))
    with pytest.raises(ValueError):
        chart_source.pull_argv("helm", ChartSource(REF), Path("/d"))


# ------------------------------------------------------------ references


@pytest.mark.parametrize(("reference", "name"), [
    (REF, "mydatabase"),
    ("oci://localhost:5000/mydatabase", "mydatabase"),
    ("oci://registry.example.com/platform/team-a/my-db", "my-db"),
    ("oci://ghcr.io/org/charts/my_db.v2", "my_db.v2"),
])
def test_chart_name_is_the_last_path_component(reference: str, name: str) -> None:
    assert chart_source.chart_name(reference) == name


@pytest.mark.parametrize("reference", [
    f"{REF}:0.1.0",
    f"{REF}@sha256:{'0' * 64}",
])
def test_a_tag_or_digest_in_the_reference_is_refused_for_the_version_flag(reference: str) -> None:
    with pytest.raises(ChartSourceError, match="--chart-version"):
        chart_source.chart_name(reference)


@pytest.mark.parametrize("reference", [
    "oci://",
    "oci://registry.example.com",
    "oci://registry.example.com/",
    "oci:///charts/mydatabase",
    "oci://registry.example.com//mydatabase",
    "oci://registry.example.com/charts/MyDatabase",
    "oci://registry.example.com/charts/mydatabase/",
    "oci://-bad-.example.com/mydatabase",
    "https://registry.example.com/charts/mydatabase",
])
def test_malformed_references_are_refused_with_the_expected_form(reference: str) -> None:
    with pytest.raises(ChartSourceError, match=r"expected oci://HOST\[:PORT\]/PATH/NAME"):
        chart_source.chart_name(reference)


# ------------------------------------------------------------- settings


def test_without_settings_the_bundled_chart_directory() -> None:
    assert settings() == ChartSource(str(BUNDLED))
    assert not settings().is_oci


def test_the_chart_directory_from_the_environment_and_the_command_line_wins() -> None:
    assert settings(MYDB_CHART_DIR="/platform/chart").location == "/platform/chart"
    assert settings("/cli/chart", MYDB_CHART_DIR="/platform/chart").location == "/cli/chart"


def test_an_oci_chart_with_its_version() -> None:
    source = settings(REF, "0.1.0")
    assert source == ChartSource(REF, "0.1.0", plain_http=False)
    assert source.is_oci and str(source) == f"{REF} version 0.1.0"


def test_an_oci_chart_without_a_version_is_refused_naming_the_reference_and_the_flag() -> None:
    with pytest.raises(SettingError) as error:
        settings(REF)
    assert REF in str(error.value)
    assert "--chart-version" in str(error.value) and "MYDB_CHART_VERSION" in str(error.value)
    with pytest.raises(SettingError, match="needs a version"):
        settings(REF, "  ")  # blank is no version
    with pytest.raises(SettingError, match="needs a version"):
        settings(MYDB_CHART_DIR=REF)


def test_an_oci_chart_entirely_from_the_environment() -> None:
    source = settings(MYDB_CHART_DIR=REF, MYDB_CHART_VERSION="1.2.3", MYDB_CHART_PLAIN_HTTP="1")
    assert source == ChartSource(REF, "1.2.3", plain_http=True)


def test_the_command_line_beats_the_environment() -> None:
    source = settings(REF, "2.0.0", True, MYDB_CHART_DIR="oci://other.example.com/x", MYDB_CHART_VERSION="1.0.0",
                      MYDB_CHART_PLAIN_HTTP="false")
    assert source == ChartSource(REF, "2.0.0", plain_http=True)


def test_a_malformed_oci_reference_is_refused_before_anything_else() -> None:
    with pytest.raises(SettingError, match="not an OCI chart reference"):
        settings("oci://registry.example.com", "0.1.0")


def test_a_version_with_a_directory_is_refused() -> None:
    with pytest.raises(SettingError, match="only to an oci:// chart"):
        settings("/platform/chart", "0.1.0")
    with pytest.raises(SettingError, match="only to an oci:// chart"):
        settings(MYDB_CHART_VERSION="0.1.0")


@pytest.mark.parametrize(("text", "expected"), [
    ("1", True), ("true", True), ("TRUE", True), (" yes ", True), ("on", True),
    ("", False), ("0", False), ("false", False), ("False", False), ("no", False), ("off", False),
])
def test_plain_http_from_the_environment(text: str, expected: bool) -> None:
    assert settings(REF, "0.1.0", MYDB_CHART_PLAIN_HTTP=text).plain_http is expected


def test_an_unclear_plain_http_setting_is_refused() -> None:
    with pytest.raises(SettingError, match="MYDB_CHART_PLAIN_HTTP='maybe'"):
        settings(REF, "0.1.0", MYDB_CHART_PLAIN_HTTP="maybe")


def test_pulled_charts_go_under_helms_cache_else_the_temp_dir() -> None:
    assert chart_source.cache_root({"HELM_CACHE_HOME": "/tmp/helm/cache"}) == Path(
        "/tmp/helm/cache/mydb-operator-charts")
    assert chart_source.cache_root({}) is None
    assert chart_source.cache_root({"HELM_CACHE_HOME": ""}) is None


def test_helms_message_is_its_last_line_without_the_prefix() -> None:
    stderr = "pulling...\nError: failed to perform \"FetchReference\" on source: x:9.9.9: not found\n\n"
    assert last_line(stderr) == 'failed to perform "FetchReference" on source: x:9.9.9: not found'
    assert last_line("\n  \n") is None


# --------------------------------------------------------------- fetch


def fake_helm(tmp_path: Path, body: str) -> str:
    """A helm that records its arguments and runs `body` (bash; $untardir is --untardir's value)."""
    script = tmp_path / "helm"
    script.write_text(f"""#!/usr/bin/env bash
printf '%s\\n' "$@" > {tmp_path / 'argv'}
untardir=""
while [[ $# -gt 0 ]]; do
  if [[ "$1" == --untardir ]]; then untardir="$2"; fi
  shift
done
{body}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_fetch_pulls_once_into_a_fresh_directory_under_helms_cache(tmp_path: Path) -> None:
    helm = fake_helm(tmp_path, 'mkdir -p "$untardir/mydatabase" && echo "name: mydatabase" > '
                               '"$untardir/mydatabase/Chart.yaml"')
    environ = {"HELM_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    source = ChartSource(REF, "0.1.0", plain_http=True)
    chart = chart_source.fetch(source, helm, environ)
    assert (chart / "Chart.yaml").is_file() and chart.name == "mydatabase"
    assert chart.parent.parent == tmp_path / "cache" / "mydb-operator-charts"
    assert chart.parent.name.startswith("mydatabase-0.1.0-")
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv == chart_source.pull_argv(helm, source, chart.parent)[1:]
    again = chart_source.fetch(source, helm, environ)
    assert again.parent != chart.parent  # each start gets its own directory: no stale chart is reused


def test_a_directory_is_used_as_it_is_without_helm(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--helm", str(tmp_path / "no-helm"), "--chart", str(tmp_path), "run"])
    assert load(args, {}).chart_dir == tmp_path


def test_a_failed_pull_names_the_reference_the_version_and_helms_message(tmp_path: Path) -> None:
    helm = fake_helm(tmp_path, 'echo "Error: failed to perform \\"FetchReference\\" on source: '
                               '127.0.0.1:16400/charts/mydatabase:9.9.9: not found" >&2; exit 1')
    with pytest.raises(ChartSourceError) as error:
        chart_source.fetch(ChartSource(REF, "9.9.9"), helm, {"HELM_CACHE_HOME": str(tmp_path / "cache")})
    assert str(error.value) == (f"cannot pull the chart {REF} version 9.9.9: failed to perform \"FetchReference\" "
                                "on source: 127.0.0.1:16400/charts/mydatabase:9.9.9: not found")


def test_a_pull_that_leaves_no_chart_is_an_error(tmp_path: Path) -> None:
    helm = fake_helm(tmp_path, "exit 0")
    with pytest.raises(ChartSourceError, match="left no single chart"):
        chart_source.fetch(ChartSource(REF, "0.1.0"), helm, {"HELM_CACHE_HOME": str(tmp_path / "cache")})


def test_an_unwritable_cache_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ChartSourceError, match="no directory to pull it into"):
        chart_source.fetch(ChartSource(REF, "0.1.0"), "helm", {"HELM_CACHE_HOME": str(tmp_path / "a-file")})


def test_no_helm_executable(tmp_path: Path) -> None:
    with pytest.raises(ChartSourceError, match="no helm executable"):
        chart_source.fetch(ChartSource(REF, "0.1.0"), str(tmp_path / "no-helm"),
                          {"HELM_CACHE_HOME": str(tmp_path / "cache")})


# ----------------------------------------------------------------- CLI


@pytest.fixture
def clean_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("MYDB_CHART_DIR", "MYDB_CHART_VERSION", "MYDB_CHART_PLAIN_HTTP"):
        monkeypatch.delenv(variable, raising=False)


def test_the_cli_stops_with_one_line_when_the_version_is_missing(clean_config: None) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["--chart", REF, "render", "-f", "-"])
    assert stop.value.code == f"mydb-operator: {REF}: an OCI chart needs a version: set --chart-version " \
                              "(or MYDB_CHART_VERSION)"


def test_the_cli_stops_with_helms_message_when_the_pull_fails(clean_config: None, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELM_CACHE_HOME", str(tmp_path / "cache"))
    helm = fake_helm(tmp_path, 'echo "Error: not found" >&2; exit 1')
    with pytest.raises(SystemExit) as stop:
        cli.main(["--helm", helm, "--chart", REF, "--chart-version", "9.9.9", "--chart-plain-http",
                  "render", "-f", "-"])
    assert stop.value.code == f"mydb-operator: cannot pull the chart {REF} version 9.9.9: not found"
    assert "--plain-http" in (tmp_path / "argv").read_text().splitlines()


def test_values_needs_no_chart_so_nothing_is_pulled(clean_config: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    database = tmp_path / "db.yaml"
    database.write_text("apiVersion: myapp.example.com/v1\nkind: MyDatabase\nmetadata: {name: db}\n"
                        "spec: {replicas: 1, version: '15.2', storage: 1Gi}\n")
    monkeypatch.delenv("MYDB_PLATFORM_CONFIG", raising=False)
    cli.main(["--helm", str(tmp_path / "no-helm"), "--chart", REF, "--chart-version", "0.1.0",
              "values", "-f", str(database)])
    assert "replicas" in capsys.readouterr().out
