"""hack/build-scanners.sh trusts its cache only when it is complete and both scanners answer with the pinned version."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "build-scanners.sh"


def real_dir() -> Path:
    result = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True)
    if result.returncode != 0:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"no installed scanners under CI: {result.stderr}")
        pytest.skip("the scanners are not installed yet (make scanners)")
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def fake_cache(tmp_path):
    """A cache root holding links to the real scanners, in the folder the script would use."""
    real = real_dir()
    folder = tmp_path / "bin" / real.name
    folder.mkdir(parents=True)
    for name in ("kube-score", "checkov-venv"):
        (folder / name).symlink_to(real / name)
    (folder / "checkov").symlink_to("checkov-venv/bin/checkov")
    (folder / ".complete").touch()
    return tmp_path, folder


def check(cache_root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--check"], env={**os.environ, "MYDB_CACHE": str(cache_root)},
                          capture_output=True, text=True)


def test_complete_cache_is_trusted_and_named(fake_cache):
    root, folder = fake_cache
    result = check(root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(folder)


def test_missing_stamp_means_partial_install(fake_cache):
    root, folder = fake_cache
    (folder / ".complete").unlink()
    assert check(root).returncode == 1


def test_missing_checkov_is_detected(fake_cache):
    root, folder = fake_cache
    (folder / "checkov").unlink()
    assert check(root).returncode == 1


def test_another_kube_score_version_is_not_trusted(fake_cache):
    root, folder = fake_cache
    (folder / "kube-score").unlink()
    (folder / "kube-score").write_text("#!/bin/sh\necho 'kube-score version: v1.19.0, commit: N/A, built: N/A'\n")
    (folder / "kube-score").chmod(0o755)
    assert check(root).returncode == 1
