"""hack/build-tools.sh trusts a cache only when it is complete and every binary runs."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "build-tools.sh"
BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "helm",
            "kubelet", "kube-proxy", "coredns", "registry"]


def real_bin_dir() -> Path:
    result = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True)
    if result.returncode != 0:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"no built tools under CI: {result.stderr}")
        pytest.skip("the tools are not built yet (make tools)")
    return Path(result.stderr.split("cache complete: ")[1].strip())


@pytest.fixture
def fake_cache(tmp_path):
    """A cache root holding links to the real binaries, in the folder the script would use."""
    real = real_bin_dir()
    bins = tmp_path / "bin" / real.name
    bins.mkdir(parents=True)
    for name in BINARIES:
        (bins / name).symlink_to(real / name)
    (bins / ".complete").touch()
    return tmp_path, bins


def check(cache_root: Path) -> int:
    return subprocess.run(["bash", str(SCRIPT), "--check"], env={**os.environ, "MYDB_CACHE": str(cache_root)},
                          capture_output=True).returncode


def test_complete_cache_is_trusted(fake_cache):
    root, _ = fake_cache
    assert check(root) == 0


def test_missing_stamp_means_partial_build(fake_cache):
    root, bins = fake_cache
    (bins / ".complete").unlink()
    assert check(root) == 1


def test_missing_binary_is_detected(fake_cache):
    root, bins = fake_cache
    (bins / "kwok").unlink()
    assert check(root) == 1


def test_broken_binary_is_detected(fake_cache):
    root, bins = fake_cache
    (bins / "kubectl").unlink()
    shutil.copyfile(real_bin_dir() / "kubectl", bins / "kubectl")
    with open(bins / "kubectl", "r+b") as truncated:
        truncated.truncate(4096)
    (bins / "kubectl").chmod(0o755)
    assert check(root) == 1


def test_an_unchanged_cache_is_trusted_without_running_its_binaries_and_a_changed_binary_is_run_again(fake_cache):
    """The stamp records each binary as it was when it answered: the next check runs none (a hit cost 0.6 CPU-s and
    1 to 4 s, some forty times a make test); one replaced since is run again, and a broken one still fails."""
    root, bins = fake_cache
    runs = root / "runs"
    (bins / "kwok").unlink()
    (bins / "kwok").write_text(f'#!/bin/sh\necho run >> "{runs}"\nexec "{real_bin_dir() / "kwok"}" "$@"\n')
    (bins / "kwok").chmod(0o755)
    assert check(root) == 0 and runs.read_text().split() == ["run"]
    assert check(root) == 0 and runs.read_text().split() == ["run"], "an unchanged cache ran a binary again"
    (bins / "helm").unlink()
    (bins / "helm").write_text("#!/bin/sh\nexit 1\n")
    (bins / "helm").chmod(0o755)
    assert check(root) == 1
