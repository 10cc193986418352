"""The flags the operator adds to pyhelm3's commands, seen in the argv a helm executable receives."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from mydb_operator.helm.command import SKIP_CLIENT_VALIDATION, OperatorCommand
from mydb_operator.helm.releases import GO_RUNTIME, Helm

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
    command = OperatorCommand(post_renderer=None, executable=str(helm))
    result = asyncio.run(command.install_or_upgrade("db", tmp_path, {"replicas": 1}, namespace="ns"))
    assert result["info"]["status"] == "deployed"
    args = argv.read_text().split("\n")
    assert args[:2] == ["upgrade", "db"]
    assert SKIP_CLIENT_VALIDATION in args


def test_post_renderer_is_added_to_upgrade_and_template_only(tmp_path: Path) -> None:
    helm, argv = recording_helm(tmp_path)
    command = OperatorCommand(post_renderer=("mydb-object-patches", "/etc/platform.yaml"), executable=str(helm))
    asyncio.run(command.install_or_upgrade("db", tmp_path, {}, namespace="ns"))
    upgrade = argv.read_text().split("\n")
    assert upgrade[upgrade.index("--post-renderer") + 1] == "mydb-object-patches"
    assert upgrade[upgrade.index("--post-renderer-args") + 1] == "/etc/platform.yaml"
    asyncio.run(command.run(["version"]))
    assert argv.read_text().split("\n")[:-1] == ["version"]  # neither flag on other commands


ENV_RECORDER = """#!/bin/sh
echo "$GOMAXPROCS $GOGC" > "{seen}"
printf v4.0.0
"""


def test_helm_runs_with_one_go_thread_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    seen = tmp_path / "seen"
    helm = tmp_path / "helm"
    helm.write_text(ENV_RECORDER.format(seen=seen))
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HELM_DRIVER", "configmap")  # Helm() sets it if unset: restored after the test
    monkeypatch.delenv("GOMAXPROCS", raising=False)
    monkeypatch.setenv("GOGC", "50")  # Go settings of whoever runs the operator reach Helm
    asyncio.run(Helm(chart, executable=str(helm), max_parallel=1).command.run(["version"]))
    assert seen.read_text().split() == [GO_RUNTIME["GOMAXPROCS"], "50"]
    monkeypatch.setenv("GOMAXPROCS", "2")
    asyncio.run(Helm(chart, executable=str(helm), max_parallel=1).command.run(["version"]))
    assert seen.read_text().split() == ["2", "50"]
