"""hack/background.py: a command on the CPU the rest leaves, then a full share again."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BACKGROUND = REPO / "hack" / "background.py"
# The command `run` execs: it keeps the pid, prints it, then waits for a line before printing its nice.
COMMAND = [sys.executable, "-c", "import os, sys; print(os.getpid(), flush=True); sys.stdin.readline(); "
                                 "print(os.nice(0), os.getsid(0) == os.getpid(), flush=True)"]


def background(*args: str, root: Path | None = None, group: str = "mydb-background",
               **popen) -> subprocess.Popen:
    env = {**os.environ, "MYDB_BACKGROUND_GROUP": group}
    if root is not None:
        env["MYDB_CGROUP_ROOT"] = str(root)
    return subprocess.Popen([sys.executable, str(BACKGROUND), *args], env=env, text=True, **popen)


def test_on_cgroup_v1_the_command_gets_the_lowest_weight_then_a_full_one(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.shares").write_text("1024")
    command = background("run", "--", *COMMAND, root=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert command.stdout is not None and command.stdin is not None
    pid = int(command.stdout.readline())
    group = tmp_path / "cpu" / "mydb-background"
    assert (group / "cpu.shares").read_text() == "2"
    assert (group / "cgroup.procs").read_text() == str(pid)  # the process `run` was is the command
    assert background("foreground", str(pid), root=tmp_path).wait(timeout=30) == 0
    assert (group / "cpu.shares").read_text() == "1024"
    command.communicate("\n", timeout=30)
    assert command.returncode == 0


def test_on_cgroup_v2_the_root_hands_down_the_cpu_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids")
    command = background("run", "--", *COMMAND, root=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert command.stdout is not None
    pid = int(command.stdout.readline())
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    assert (tmp_path / "mydb-background" / "cpu.weight").read_text() == "1"
    assert background("foreground", str(pid), root=tmp_path).wait(timeout=30) == 0
    assert (tmp_path / "mydb-background" / "cpu.weight").read_text() == "100"
    command.communicate("\n", timeout=30)


def test_without_a_cpu_controller_it_runs_at_nice_19_in_a_session_of_its_own_until_foreground(
        tmp_path: Path) -> None:
    command = background("run", "--", *COMMAND, root=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert command.stdout is not None and command.stdin is not None
    pid = int(command.stdout.readline())
    assert os.getpriority(os.PRIO_PROCESS, pid) == 19 and os.getsid(pid) == pid
    assert background("foreground", str(pid), root=tmp_path).wait(timeout=30) == 0
    printed, _ = command.communicate("\n", timeout=30)
    assert printed.split() == ["0", "True"]


def test_on_this_host_the_command_really_runs_in_the_group_and_the_group_goes_afterwards() -> None:
    """The real controller (the one `make test` uses), under a group name of this test's own."""
    root = Path("/sys/fs/cgroup")
    if not os.access(root / "cpu", os.W_OK) and not os.access(root / "cgroup.subtree_control", os.W_OK):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and no writable cpu cgroup controller: make test would run make check at nice 19")
        pytest.skip("no writable cpu cgroup controller here")
    name = f"mydb-background-test-{uuid.uuid4().hex[:6]}"
    shown = background("run", "--", sys.executable, "-c", "print(open('/proc/self/cgroup').read())", group=name,
                       stdout=subprocess.PIPE)
    printed, _ = shown.communicate(timeout=30)
    assert shown.returncode == 0
    assert any(line.split(":")[-1] == f"/{name}" for line in printed.splitlines()
               if "cpu" in line.split(":")[1].split(",") or line.startswith("0::")), printed
    assert background("remove", group=name).wait(timeout=30) == 0
    assert not (root / "cpu" / name).exists() and not (root / name).exists()
