"""The flags the operator adds to pyhelm3's commands, seen in the argv a helm executable receives."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from mydb_operator.helm.command import SKIP_CLIENT_VALIDATION, OperatorCommand

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
