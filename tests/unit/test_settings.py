"""The one settings loader: each flag over its environment variable over the default, one reading of
yes/no words, and a plain message (no traceback) for a value it cannot use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mydb_operator import cli
from mydb_operator.commands.arguments import build_parser
from mydb_operator.commands.settings import load
from mydb_operator.config import BUNDLED_CHART, FALSE_WORDS, TRUE_WORDS, Config, SettingError, parse_bool


def settings(*argv: str, command: str = "run", **environ: str) -> Config:
    """Global flags, then the command and its flags: `settings("--helm", "h", "--resync", "5")`."""
    parser = build_parser()
    global_flags = {"--chart", "--chart-version", "--chart-plain-http", "--helm", "--platform-config"}
    head: list[str] = []
    tail: list[str] = []
    items = list(argv)
    while items:
        flag = items.pop(0)
        target = head if flag.partition("=")[0] in global_flags else tail
        target.append(flag)
        if "=" not in flag and flag != "--chart-plain-http" and items:
            target.append(items.pop(0))
    extra = ["-f", "db.yaml"] if command in ("render", "values") else []
    return load(parser.parse_args([*head, command, *extra, *tail]), environ)


# ------------------------------------------------------------------ defaults


def test_without_flags_or_environment_the_documented_defaults() -> None:
    config = settings()
    assert config == Config(
        command="run",
        chart=str(BUNDLED_CHART),
        chart_dir=BUNDLED_CHART,
        chart_origin=str(BUNDLED_CHART),
        environment={},
        identity=config.identity,
    )
    assert (config.resync_seconds, config.metrics_port, config.health_port) == (60.0, 9090, 8080)
    assert (config.helm, config.helm_parallel, config.rollout_window, config.log_format) == ("helm", 2, 16, "text")
    assert config.leader_elect is True and config.leader_lease_name == "mydb-operator"
    assert config.leader_lease_seconds == 15 and config.leader_lease_namespace is None
    assert config.platform_config is None and config.namespaces == ()


# ---------------------------------------------------------------- precedence

# (flag, its value, the variable, its value, the Config field, the flag's setting, the variable's)
BOTH = [
    ("--helm", "/cli/helm", "MYDB_HELM", "/env/helm", "helm", "/cli/helm", "/env/helm"),
    ("--chart", "/cli/chart", "MYDB_CHART_DIR", "/env/chart", "chart", "/cli/chart", "/env/chart"),
    ("--platform-config", "/cli/p.yaml", "MYDB_PLATFORM_CONFIG", "/env/p.yaml", "platform_config",
     Path("/cli/p.yaml"), Path("/env/p.yaml")),
    ("--resync", "5", "MYDB_RESYNC_SECONDS", "7.5", "resync_seconds", 5.0, 7.5),
    ("--metrics-port", "9300", "MYDB_METRICS_PORT", "9400", "metrics_port", 9300, 9400),
    ("--helm-parallel", "8", "MYDB_HELM_PARALLEL", "4", "helm_parallel", 8, 4),
    ("--rollout-window", "0", "MYDB_ROLLOUT_WINDOW", "100", "rollout_window", 0, 100),
    ("--leader-lease-namespace", "cli-ns", "POD_NAMESPACE", "pod-ns", "leader_lease_namespace", "cli-ns", "pod-ns"),
]


@pytest.mark.parametrize(("flag", "flag_text", "variable", "variable_text", "field", "from_flag", "from_variable"),
                         BOTH, ids=[row[0] for row in BOTH])
def test_the_flag_wins_over_the_environment_which_wins_over_the_default(
        flag: str, flag_text: str, variable: str, variable_text: str, field: str,
        from_flag: object, from_variable: object) -> None:
    default = getattr(settings(), field)
    assert getattr(settings(**{variable: variable_text}), field) == from_variable != default
    assert getattr(settings(flag, flag_text, **{variable: variable_text}), field) == from_flag
    assert getattr(settings(flag, flag_text), field) == from_flag
    assert getattr(settings(**{variable: ""}), field) == default  # set but empty: unset


def test_the_chart_version_and_plain_http_flags_win_over_the_environment() -> None:
    ref = "oci://registry.example.com/charts/mydatabase"
    config = settings("--chart", ref, "--chart-version", "2.0.0", "--chart-plain-http", command="values",
                      MYDB_CHART_VERSION="1.0.0", MYDB_CHART_PLAIN_HTTP="false")
    assert (config.chart_version, config.chart_plain_http) == ("2.0.0", True)
    config = settings(command="values", MYDB_CHART_DIR=ref, MYDB_CHART_VERSION="1.0.0", MYDB_CHART_PLAIN_HTTP="yes")
    assert (config.chart, config.chart_version, config.chart_plain_http) == (ref, "1.0.0", True)
    assert config.chart_dir is None and config.chart_origin == f"{ref} version 1.0.0"  # values pulls nothing


def test_flag_only_settings() -> None:
    config = settings("-n", "team-a", "--namespace", "team-b", "--health-port", "0", "--log-format", "json",
                      "--leader-elect=false", "--leader-lease-name", "ours", "--leader-lease-seconds", "5")
    assert config.namespaces == ("team-a", "team-b") and config.health_port == 0 and config.log_format == "json"
    assert config.leader_elect is False and config.leader_lease_name == "ours" and config.leader_lease_seconds == 5


def test_render_and_values_take_the_file_and_renders_namespace() -> None:
    render = load(build_parser().parse_args(["render", "-f", "db.yaml", "--namespace", "ns"]), {})
    assert (render.command, render.manifest, render.render_namespace, render.namespaces) == (
        "render", "db.yaml", "ns", ())
    values = load(build_parser().parse_args(["values", "-f", "-"]), {})
    assert (values.command, values.manifest, values.render_namespace) == ("values", "-", None)


def test_the_environment_is_the_one_passed_in_not_the_processs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYDB_HELM", "/process/helm")
    monkeypatch.setenv("MYDB_RESYNC_SECONDS", "not a number")
    config = settings(MYDB_HELM="/given/helm", HELM_CACHE_HOME="/tmp/cache")
    assert config.helm == "/given/helm" and config.resync_seconds == 60.0
    assert config.environment == {"MYDB_HELM": "/given/helm", "HELM_CACHE_HOME": "/tmp/cache"}  # what Helm gets


def test_the_environment_is_left_out_of_the_settings_repr() -> None:
    assert "secret" not in repr(settings(AWS_SECRET_ACCESS_KEY="secret"))


# ------------------------------------------------------------- yes and no


@pytest.mark.parametrize("word", [*TRUE_WORDS, "TRUE", " Yes ", "On"])
def test_true_words(word: str) -> None:
    assert parse_bool("X", word) is True


@pytest.mark.parametrize("word", [*FALSE_WORDS, "FALSE", " No ", "Off"])
def test_false_words(word: str) -> None:
    assert parse_bool("X", word) is False


def test_one_list_of_words_for_the_flag_and_the_variable() -> None:
    for word in (*TRUE_WORDS, *FALSE_WORDS):
        expected = word in TRUE_WORDS
        assert settings(f"--leader-elect={word}").leader_elect is expected
        ref = "oci://registry.example.com/charts/mydatabase"
        config = settings("--chart", ref, "--chart-version", "1.0.0", command="values", MYDB_CHART_PLAIN_HTTP=word)
        assert config.chart_plain_http is expected


@pytest.mark.parametrize("word", ["maybe", "2", "y", "enabled", "tru"])
def test_an_unknown_word_names_the_variable_and_the_words_it_takes(word: str) -> None:
    with pytest.raises(SettingError) as error:
        parse_bool("MYDB_CHART_PLAIN_HTTP", word)
    assert str(error.value) == (f"MYDB_CHART_PLAIN_HTTP={word!r}: expected true or false: "
                                "one of true, yes, on, 1 or false, no, off, 0 (any case)")


# --------------------------------------------------------- unusable values


@pytest.mark.parametrize(("variable", "text", "expected"), [
    ("MYDB_RESYNC_SECONDS", "soon", "MYDB_RESYNC_SECONDS='soon': expected a number"),
    ("MYDB_RESYNC_SECONDS", "0", "MYDB_RESYNC_SECONDS='0': expected a number of seconds above 0"),
    ("MYDB_RESYNC_SECONDS", "nan", "MYDB_RESYNC_SECONDS='nan': expected a finite number"),
    ("MYDB_METRICS_PORT", "9090.5", "MYDB_METRICS_PORT='9090.5': expected a whole number"),
    ("MYDB_METRICS_PORT", "70000", "MYDB_METRICS_PORT='70000': expected a port from 1 to 65535, or 0 for none"),
    ("MYDB_HELM_PARALLEL", "0", "MYDB_HELM_PARALLEL='0': expected a whole number, at least 1"),
    ("MYDB_HELM_PARALLEL", "two", "MYDB_HELM_PARALLEL='two': expected a whole number"),
    ("MYDB_ROLLOUT_WINDOW", "-1", "MYDB_ROLLOUT_WINDOW='-1': expected a whole number, at least 0"),
])
def test_an_unusable_variable_is_refused_naming_it(variable: str, text: str, expected: str) -> None:
    with pytest.raises(SettingError) as error:
        settings(**{variable: text})
    assert str(error.value) == expected


@pytest.mark.parametrize(("argv", "expected"), [
    (["--helm-parallel", "0"], "--helm-parallel='0': expected a whole number, at least 1"),
    (["--metrics-port=-1"], "--metrics-port='-1': expected a port from 1 to 65535, or 0 for none"),
    (["--resync=-5"], "--resync='-5.0': expected a number of seconds above 0"),
    (["--leader-lease-seconds", "0"], "--leader-lease-seconds='0': expected a whole number, at least 1"),
])
def test_an_unusable_flag_is_refused_naming_it(argv: list[str], expected: str) -> None:
    with pytest.raises(SettingError) as error:
        settings(*argv)
    assert str(error.value) == expected


def test_the_cli_stops_with_one_line_and_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYDB_HELM_PARALLEL", "lots")
    with pytest.raises(SystemExit) as stop:
        cli.main(["values", "-f", "-"])
    assert stop.value.code == "mydb-operator: MYDB_HELM_PARALLEL='lots': expected a whole number"
    result = subprocess.run([sys.executable, "-m", "mydb_operator.cli", "values", "-f", "-"], input="",
                            capture_output=True, text=True, env={"MYDB_CHART_PLAIN_HTTP": "maybe"})
    assert result.returncode == 1
    assert result.stderr == ("mydb-operator: MYDB_CHART_PLAIN_HTTP='maybe': expected true or false: "
                             "one of true, yes, on, 1 or false, no, off, 0 (any case)\n")


def test_an_unknown_flag_value_is_argparses_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["run", "--log-format", "xml"], ["run", "--leader-elect=maybe"], ["run", "--resync", "soon"]):
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args(argv)
        assert stop.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


# ------------------------------------------------------------ documented once


class Recording(dict[str, str]):
    """An environment that remembers which variables were asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)


def documented_settings() -> tuple[set[str], set[str]]:
    """The flags and variables of docs/install.md's Settings table."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    table = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    flags: set[str] = set()
    variables: set[str] = set()
    for row in table.splitlines():
        cells = row.split(" | ")
        if not row.startswith("| ") or len(cells) < 4 or cells[0] in ("| flag", "|---"):
            continue
        flags |= set(re.findall(r"(?<![\w-])(--[a-z-]+|-n)\b", cells[0]))
        variables |= set(re.findall(r"`([A-Z_]+)`", cells[1]))
    return flags, variables


def test_every_flag_and_variable_is_in_the_settings_table_of_install_md() -> None:
    parser = build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    actual_flags = {option for p in (parser, run) for action in p._actions for option in action.option_strings}
    actual_flags -= {"-h", "--help"}
    environ = Recording()
    load(parser.parse_args(["run"]), environ)
    flags, variables = documented_settings()
    assert flags == actual_flags
    assert variables == environ.asked
