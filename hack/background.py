"""Run a command on the CPU the rest of the machine leaves, then give it a full share again.

`make test` runs the part of `make check` that only computes (the chart's renders and scanners, the
benchmark's pure functions) beside the e2e pass instead of after it. The pass keeps both cores busy most
of the time, but its workers also wait together (on PostgreSQL, on kubelet timers), and those idle
seconds are enough for these tests. They run in a cpu cgroup of the lowest weight (cpu.shares 2 on cgroup
v1, cpu.weight 1 on v2, against a process group's 1024 and 100), so they take next to nothing from the
pass while it computes (at an eighth of a group's weight they took as much from it as they saved); once
the pass ends, `foreground` gives the group a normal weight for the run's tail. On a host without a
writable cpu controller the command runs at nice 19 in a session of its own (whose autogroup gets nice
19 too: with autogroups, nice alone only ranks a session's own processes).

    background.py run -- COMMAND...   exec COMMAND in the background group (it keeps this process's pid)
    background.py foreground PID      the group's weight back to normal (PID: the process `run` became)
    background.py remove              remove the group once its processes have ended
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

GROUP = os.environ.get("MYDB_BACKGROUND_GROUP", "mydb-background")
# A process group's own weight, and the background's: the lowest there is.
V1_SHARES = {"foreground": 1024, "background": 2}
V2_WEIGHTS = {"foreground": 100, "background": 1}
NICE = {"foreground": 0, "background": 19}


def cgroup_root() -> Path:
    return Path(os.environ.get("MYDB_CGROUP_ROOT", "/sys/fs/cgroup"))


def group(root: Path) -> Path | None:
    """The background group's folder under the host's cpu controller (v1 or v2); None when it has neither."""
    if (root / "cpu" / "cpu.shares").exists():
        return root / "cpu" / GROUP
    if (root / "cgroup.controllers").exists():
        return root / GROUP
    return None


def set_weight(folder: Path, which: str) -> None:
    if folder.parent.name == "cpu":
        (folder / "cpu.shares").write_text(str(V1_SHARES[which]))
    else:
        (folder / "cpu.weight").write_text(str(V2_WEIGHTS[which]))


def enter(root: Path) -> str:
    """Move this process into the background group (made if missing); by nice when there is none."""
    folder = group(root)
    if folder is not None:
        try:
            if folder.parent == root:  # v2: the root hands the cpu controller to its children
                (root / "cgroup.subtree_control").write_text("+cpu")
            folder.mkdir(exist_ok=True)
            set_weight(folder, "background")
            (folder / "cgroup.procs").write_text(str(os.getpid()))
            return f"the cpu cgroup {folder}"
        except OSError as error:
            print(f"background: no cpu cgroup ({error}); nice 19 instead", file=sys.stderr)
    os.setsid()
    set_nice(os.getpid(), "background")
    return "nice 19"


def set_nice(pid: int, which: str) -> None:
    os.setpriority(os.PRIO_PROCESS, pid, NICE[which])
    with contextlib.suppress(OSError):  # a kernel without autogroups: nice alone ranks it
        Path(f"/proc/{pid}/autogroup").write_text(str(NICE[which]))


def in_session(session: int) -> list[int]:
    """The processes of a session (the one `run` made with setsid when it fell back to nice)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[3]) == session:
            found.append(int(entry.name))
    return found


def foreground(root: Path, pid: int) -> None:
    """Normal weight for the group, and nice 0 for every process of the session a fallback `run` made
    (its command leads a session of its own)."""
    folder = group(root)
    if folder is not None and folder.is_dir():
        try:
            set_weight(folder, "foreground")
        except OSError as error:
            print(f"background: could not raise the weight of {folder}: {error}", file=sys.stderr)
    try:
        fell_back = os.getsid(pid) == pid
    except ProcessLookupError:
        return  # it has ended: nothing left to hurry
    for process in in_session(pid) if fell_back else []:
        with contextlib.suppress(OSError):  # ended meanwhile
            set_nice(process, "foreground")


def remove(root: Path) -> None:
    folder = group(root)
    if folder is not None and folder.is_dir():
        try:
            folder.rmdir()
        except OSError as error:
            print(f"background: could not remove {folder}: {error}", file=sys.stderr)


def main(argv: list[str]) -> None:
    root = cgroup_root()
    if argv[:2] == ["run", "--"] and len(argv) > 2:
        how = enter(root)
        print(f"background: {' '.join(argv[2:4])} ... runs in {how}", file=sys.stderr)
        os.execvp(argv[2], argv[2:])
    elif argv[:1] == ["foreground"] and len(argv) == 2:
        foreground(root, int(argv[1]))
    elif argv == ["remove"]:
        remove(root)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
