"""The operator as a measured process: started under its ServiceAccount, sampled for memory, read for CPU."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from . import prom

REPO = Path(__file__).resolve().parents[1]
OPERATOR_METRICS = (
    "mydb_helm_invocations_total",
    "mydb_reconciles_total",
    "mydb_status_patches_total",
    "mydb_errors_total",
    "mydb_observations_total",
)
MB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class OperatorProcess:
    """`mydb-operator run` as a child process, like tests/e2e/conftest.py runs it."""

    def __init__(
        self,
        kubeconfig: Path,
        helm: str,
        bin_dir: str,
        log_path: Path,
        resync: float,
        helm_parallel: int,
        rollout_window: int,
        extra_args: list[str] | None = None,
    ):
        self.kubeconfig, self.helm, self.bin_dir, self.log_path = kubeconfig, helm, bin_dir, log_path
        self.resync, self.helm_parallel, self.rollout_window = resync, helm_parallel, rollout_window
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_port = 0

    def start(self, timeout: float = 60) -> None:
        helm_home = self.log_path.parent / "helm-home"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "MYDB_HELM": self.helm,
            "MYDB_HELM_PARALLEL": str(self.helm_parallel),
            "MYDB_ROLLOUT_WINDOW": str(self.rollout_window),
            "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
            "HELM_CACHE_HOME": str(helm_home / "cache"),
            "HELM_CONFIG_HOME": str(helm_home / "config"),
            "HELM_DATA_HOME": str(helm_home / "data"),
        }
        self.metrics_port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mydb_operator.cli",
                    "run",
                    "--health-port",
                    "0",
                    "--resync",
                    str(self.resync),
                    "--metrics-port",
                    str(self.metrics_port),
                    *self.extra_args,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited ({self.process.returncode}); see {self.log_path}")
            if "chart " in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"the operator did not start within {timeout:.0f}s; see {self.log_path}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def metrics(self) -> prom.Samples:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            return prom.parse(response.read().decode(), OPERATOR_METRICS)

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: the operator itself, and its finished children (Helm runs) apart."""
        times = psutil.Process(self.pid).cpu_times()
        return {"operator": times.user + times.system, "helm": times.children_user + times.children_system}

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tracebacks(self) -> int:
        return self.log_path.read_text(errors="replace").count("Traceback")


@dataclass
class Peaks:
    rss: int = 0  # the operator process
    tree_rss: int = 0  # the operator and every process below it (Helm runs)
    tree_pss: int = 0  # the same tree's proportional set size: shared pages split, as a cgroup would charge them
    children: int = 0  # most processes below the operator at once
    samples: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "operator_rss_mb": round(self.rss / MB, 1),
            "tree_rss_mb": round(self.tree_rss / MB, 1),
            "tree_pss_mb": round(self.tree_pss / MB, 1),
            "max_children": self.children,
            "samples": self.samples,
        }


class Sampler(threading.Thread):
    """Samples the operator's RSS and its process tree's every `interval` seconds; peaks per phase."""

    def __init__(self, pid: int, interval: float = 0.15, pss_interval: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.interval, self.pss_interval = pid, interval, pss_interval
        self.phase = "start"  # set by the caller as the run moves on
        self.peaks: dict[str, Peaks] = {}
        self.overall = Peaks()
        self.series: list[tuple[float, float, float, int]] = []  # (t, rss MB, tree MB, children), ~1/s
        self.stopping = threading.Event()
        self.started = time.monotonic()

    def run(self) -> None:
        try:
            process = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        last_series = last_pss = 0.0
        while not self.stopping.wait(self.interval):
            try:
                rss = process.memory_info().rss
                children = process.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            tree = rss
            for child in children:
                with contextlib.suppress(psutil.NoSuchProcess):
                    tree += child.memory_info().rss
            now = time.monotonic() - self.started
            pss = 0
            if now - last_pss >= self.pss_interval:  # reading smaps costs ~1 ms per process: not every sample
                last_pss = now
                pss = self._pss([process, *children])
            for peaks in (self.peaks.setdefault(self.phase, Peaks()), self.overall):
                peaks.rss = max(peaks.rss, rss)
                peaks.tree_rss = max(peaks.tree_rss, tree)
                peaks.tree_pss = max(peaks.tree_pss, pss)
                peaks.children = max(peaks.children, len(children))
                peaks.samples += 1
            if now - last_series >= 1.0:
                last_series = now
                self.series.append((round(now, 1), round(rss / MB, 1), round(tree / MB, 1), len(children)))

    @staticmethod
    def _pss(processes: list[psutil.Process]) -> int:
        total = 0
        for proc in processes:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += proc.memory_full_info().pss
        return total

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)


def component_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each control plane process (etcd, kube-apiserver, ...)."""
    out = {}
    for name, pid in pids.items():
        try:
            times = psutil.Process(pid).cpu_times()
            out[name] = times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return out


def own_children_cpu() -> float:
    """CPU seconds of this process's finished children (the floor's kubectl runs)."""
    times = os.times()
    return times.children_user + times.children_system
