"""The flags the operator adds to pyhelm3's commands, seen in the argv a helm executable receives."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pyhelm3
import pytest
from pyhelm3 import errors as helm_errors

from mydb_operator.helm import postrender
from mydb_operator.helm.command import SKIP_CLIENT_VALIDATION, OperatorCommand
from mydb_operator.helm.errors import HelmError
from mydb_operator.helm.releases import GO_RUNTIME, HELM_DRIVER, Helm

ENVIRONMENT = {"PATH": os.environ.get("PATH", os.defpath)}

RECORDER = """#!/bin/sh
printf '%s\\n' "$@" > "{argv}"
echo '{{"version": 1, "info": {{"status": "deployed"}}}}'
"""


def recording_helm(tmp_path: Path) -> tuple[Path, Path]:
    argv = tmp_path / "argv"
    helm = tmp_path / "helm"
    helm.write_text(RECORDER.format(argv=argv))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    return helm, argv


def test_upgrade_skips_client_side_openapi_validation(tmp_path: Path) -> None:
    helm, argv = recording_helm(tmp_path)
    command = OperatorCommand(post_renderer=None, environment=ENVIRONMENT, executable=str(helm))
    result = asyncio.run(command.install_or_upgrade("db", tmp_path, {"replicas": 1}, namespace="ns"))
    assert result["info"]["status"] == "deployed"
    args = argv.read_text().split("\n")
    assert args[:2] == ["upgrade", "db"]
    assert SKIP_CLIENT_VALIDATION in args


def test_post_renderer_is_added_to_upgrade_and_template_only(tmp_path: Path) -> None:
    helm, argv = recording_helm(tmp_path)
    command = OperatorCommand(post_renderer=("mydb-object-patches", "/etc/platform.yaml"), environment=ENVIRONMENT,
                              executable=str(helm))
    asyncio.run(command.install_or_upgrade("db", tmp_path, {}, namespace="ns"))
    upgrade = argv.read_text().split("\n")
    assert upgrade[upgrade.index("--post-renderer") + 1] == "mydb-object-patches"
    assert upgrade[upgrade.index("--post-renderer-args") + 1] == "/etc/platform.yaml"
    asyncio.run(command.run(["version"]))
    assert argv.read_text().split("\n")[:-1] == ["version"]  # neither flag on other commands


RENDERER = """#!/bin/sh
printf '%s\\n' "$@" > "{argv}"
cat > "{values}"
cat <<'END'
---
# Source: an empty document, as a template that renders nothing leaves one
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: plain}}
data: {{equals: =, number: "5432", script: "a: b"}}
---
apiVersion: v1
kind: Service
metadata: {{name: db}}
spec: {{ports: [{{port: 5432}}]}}
END
"""


def test_render_parses_what_pyhelm3_parses_and_asks_what_upgrade_applies(tmp_path: Path) -> None:
    """The render the chart check and the major upgrade compare against: hooks and CRDs left out, the values
    on stdin, and the objects pyhelm3's own parse gives (a plain `=` is a string)."""
    argv, values, helm = tmp_path / "argv", tmp_path / "values", tmp_path / "helm"
    helm.write_text(RENDERER.format(argv=argv, values=values))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    command = OperatorCommand(post_renderer=None, environment=ENVIRONMENT, executable=str(helm))
    rendered = asyncio.run(command.render("db", "/charts/mydatabase", {"replicas": 2}, namespace="ns",
                                          version="1.2.3"))
    assert argv.read_text().split("\n")[:-1] == [
        "template", "db", "/charts/mydatabase", "--skip-crds", "--no-hooks", "--values", "-", "--namespace", "ns",
        "--version", "1.2.3"]
    assert values.read_text() == '{"replicas": 2}'
    theirs = asyncio.run(pyhelm3.Command(executable=str(helm)).template("db", "/charts/mydatabase", {}))
    assert rendered == [document for document in theirs if document]
    assert [o["kind"] for o in rendered] == ["ConfigMap", "Service"]
    assert rendered[0]["data"] == {"equals": "=", "number": "5432", "script": "a: b"}


ENV_RECORDER = """#!/bin/sh
echo "$GOMAXPROCS ${{GOGC:--}} $HELM_DRIVER ${{HELM_PLUGINS:--}} ${{MYDB_NOT_PASSED:--}}" > "{seen}"
printf v4.0.0
"""


def chart_and_recorder(tmp_path: Path) -> tuple[Path, Path, Path]:
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    seen = tmp_path / "seen"
    helm = tmp_path / "helm"
    helm.write_text(ENV_RECORDER.format(seen=seen))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    return chart, helm, seen


def test_helm_runs_in_the_environment_given_with_one_go_thread_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart, helm, seen = chart_and_recorder(tmp_path)
    monkeypatch.setenv("MYDB_NOT_PASSED", "x")  # the process's environment is not Helm's: only what is given
    environment = {**ENVIRONMENT, "GOGC": "50"}  # Go settings of whoever runs the operator reach Helm
    asyncio.run(Helm(chart, environment=environment, executable=str(helm), max_parallel=1).command.run(["version"]))
    assert seen.read_text().split() == [GO_RUNTIME["GOMAXPROCS"], "50", HELM_DRIVER, "-", "-"]
    environment = {**environment, "GOMAXPROCS": "2", "HELM_DRIVER": "secret"}  # the operator's environment wins
    asyncio.run(Helm(chart, environment=environment, executable=str(helm), max_parallel=1).command.run(["version"]))
    assert seen.read_text().split() == ["2", "50", "secret", "-", "-"]


def test_helm_leaves_os_environ_alone_and_its_plugins_folder_goes_on_close(tmp_path: Path) -> None:
    chart, helm, seen = chart_and_recorder(tmp_path)
    platform = tmp_path / "platform.yaml"
    platform.write_text("objectPatches: []\n")
    before = dict(os.environ)
    made = Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1, platform_config=platform,
                post_render=True)
    assert dict(os.environ) == before
    assert made.plugins is not None and (made.plugins / postrender.PLUGIN_NAME / "plugin.yaml").is_file()
    asyncio.run(made.command.run(["version"]))
    assert seen.read_text().split()[3] == str(made.plugins)  # Helm finds the post-renderer there
    plugins = made.plugins
    made.close()
    assert not plugins.exists() and made.plugins is None
    made.close()  # twice: nothing to do
    with Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1, platform_config=platform,
              post_render=True) as helm_in_use:
        plugins = helm_in_use.plugins
        assert plugins is not None and plugins.is_dir()
    assert not plugins.exists()
    assert dict(os.environ) == before


def test_without_a_post_renderer_no_folder_at_all(tmp_path: Path) -> None:
    chart, helm, _ = chart_and_recorder(tmp_path)
    with Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1) as made:
        assert made.plugins is None and "HELM_PLUGINS" not in made.command.environment


FAILING = """#!/bin/sh
printf '%s' "$FAKE_STDERR" >&2
exit 3
"""


@pytest.mark.parametrize("stderr", [
    "Error: something else",
    "Error: context canceled",
    "Error: etcdserver: request timed out, release: not found",
    "Error: release: not found",
    "Error: UPGRADE FAILED: failed to render chart: x",
    "Error: execution error at (c/templates/x.yaml:1:1): boom",
    "Error: rendered manifests contain a resource that already exists",
    "Error: StatefulSet.apps \"db\" is invalid: spec: Forbidden",
    'Error: chart "c" version "9.9.9" not found',
    "Error: read: operation timed out",
])
def test_a_failure_gets_the_error_class_pyhelm3_would_give_it(tmp_path: Path, stderr: str) -> None:
    helm = tmp_path / "helm"
    helm.write_text(FAILING)
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    environment = {**ENVIRONMENT, "FAKE_STDERR": stderr}
    ours = OperatorCommand(post_renderer=None, environment=environment, executable=str(helm))
    with pytest.raises(helm_errors.Error) as our_error:
        asyncio.run(ours.run(["version"]))
    os.environ["FAKE_STDERR"] = stderr  # pyhelm3's own Command inherits the process's environment
    try:
        with pytest.raises(helm_errors.Error) as their_error:
            asyncio.run(pyhelm3.Command(executable=str(helm)).run(["version"]))
    finally:
        del os.environ["FAKE_STDERR"]
    assert type(our_error.value) is type(their_error.value)
    assert (our_error.value.returncode, our_error.value.stderr) == (3, stderr.encode())


STUBBORN = """#!{python}
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open("{pid}", "w") as pid:
    pid.write(str(os.getpid()))
time.sleep(30)
"""


def test_a_cancelled_run_whose_helm_ignores_sigterm_is_killed_in_time(tmp_path: Path, monkeypatch) -> None:
    """Seen in CI: a Helm run that outlived its daemon's cancellation left its pipes to be closed after the event
    loop (a traceback at the operator's exit). SIGTERM, then SIGKILL after STOP_SECONDS; also when, under load,
    the cancellation lands while the pipes to the running Helm are still being connected (CI: killed at once)."""
    from mydb_operator.helm import command as helm_command

    monkeypatch.setattr(helm_command, "STOP_SECONDS", 1.0)
    pid_file, helm = tmp_path / "pid", tmp_path / "helm"
    helm.write_text(STUBBORN.format(python=sys.executable, pid=pid_file))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    command = OperatorCommand(post_renderer=None, environment=ENVIRONMENT, executable=str(helm))

    async def cancel_a_run() -> float:
        run = asyncio.create_task(command.run(["upgrade", "db"]))
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.05)
        run.cancel()
        started = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.CancelledError):
            await run
        return asyncio.get_running_loop().time() - started

    took = asyncio.run(cancel_a_run())
    assert 0.9 < took < 3, took
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)



# A helm whose first upgrade finds the release half-done (STATE), as Helm says it; `show chart` answers for the
# chart; every call is recorded, one per line.
HALF_DONE_HELM = """#!/bin/sh
echo "$*" >> "{calls}"
case "$1" in
  version) printf v4.3.1 ;;
  show) printf 'apiVersion: v2\\nname: c\\nversion: 0.1.0\\n' ;;
  status) echo '{{"name": "db", "namespace": "ns", "version": 3, "manifest": "",
    "info": {{"status": "{state}", "last_deployed": "2026-12-04T18:43:13Z"}}}}' ;;
  upgrade)
    if [ ! -e "{calls}.upgraded" ]; then
      touch "{calls}.upgraded"
      echo "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress" >&2; exit 1
    fi
    echo '{{"version": 4, "info": {{"status": "deployed"}}}}' ;;
esac
"""


@pytest.mark.parametrize(("state", "recovery"), [
    ("pending-upgrade", "rollback db --cleanup-on-fail --namespace ns"),
    ("pending-rollback", "rollback db --cleanup-on-fail --namespace ns"),
    ("pending-install", "uninstall db --namespace ns --wait"),
    ("uninstalling", "uninstall db --namespace ns --wait"),
])
def test_a_half_done_release_is_recovered_then_upgraded_and_a_rollback_does_not_wait(
    tmp_path: Path, state: str, recovery: str
) -> None:
    """A pending upgrade is rolled back without --wait: the upgrade right after applies the wanted state, and the
    wait on pods mid-way through a major upgrade held a Helm slot for the whole timeout. A pending install is
    uninstalled and waited for: the install after it makes the same objects again."""
    chart, _, _ = chart_and_recorder(tmp_path)
    calls = tmp_path / "calls"
    helm = tmp_path / "half-done-helm"
    helm.write_text(HALF_DONE_HELM.format(calls=calls, state=state))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    applied = asyncio.run(Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1)
                          .upgrade("ns", "db", {"replicas": 1}))
    assert applied.revision == 4
    made = [line for line in calls.read_text().splitlines() if line.split()[0] not in ("version", "show")]
    assert [line.split()[0] for line in made] == ["upgrade", "status", recovery.split()[0], "upgrade"]
    recovered = made[2].split()
    assert recovered[:2] == recovery.split()[:2] and set(recovery.split()) <= set(recovered)
    assert ("--wait" in recovered) == recovery.endswith("--wait")


def test_the_chart_and_its_values_are_read_from_its_folder_without_a_helm_run(tmp_path: Path) -> None:
    """Chart.yaml and values.yaml as `helm show chart` and `show values` print them: two Helm runs less at every
    start (the chart check) and every `render`; a file that does not parse is a HelmError naming it."""
    chart, _, _ = chart_and_recorder(tmp_path)
    (chart / "values.yaml").write_text("replicas: 1\npostgresql: {port: 5433}\n")
    calls = tmp_path / "calls"
    helm = tmp_path / "counting-helm"
    helm.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n[ "$1" = version ] && printf v4.3.1\n')
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    loaded = Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1)
    assert asyncio.run(loaded.default_values()) == {"replicas": 1, "postgresql": {"port": 5433}}
    found = asyncio.run(loaded.chart())
    assert (found.metadata.name, found.metadata.version, found.ref) == ("c", "0.1.0", chart.resolve())
    # pyhelm3's client asks the version once, as it is made; nothing else ran.
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["version"]

    (chart / "values.yaml").unlink()
    assert asyncio.run(Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1)
                       .default_values()) == {}
    (chart / "values.yaml").write_text("replicas: [1\n")
    with pytest.raises(HelmError, match="cannot read the chart's values .*values.yaml"):
        asyncio.run(Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1).default_values())
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\n")  # no version
    with pytest.raises(HelmError, match="cannot load the chart"):
        asyncio.run(Helm(chart, environment=ENVIRONMENT, executable=str(helm), max_parallel=1).chart())
