"""hack/build-kube-router.sh trusts its cache only when the stamp is there and the binary answers with the pinned
version."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "build-kube-router.sh"


def real_binary() -> Path:
    result = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True)
    if result.returncode != 0:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"kube-router is not built under CI: {result.stderr}")
        pytest.skip("kube-router is not built yet (make tools)")
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def fake_cache(tmp_path):
    """A cache root holding a link to the real binary, in the folder the script would use."""
    real = real_binary()
    folder = tmp_path / "bin" / real.parent.name
    folder.mkdir(parents=True)
    (folder / "kube-router").symlink_to(real)
    (folder / ".complete").touch()
    return tmp_path, folder


def check(cache_root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--check"], env={**os.environ, "MYDB_CACHE": str(cache_root)},
                          capture_output=True, text=True)


def test_a_complete_cache_is_trusted_and_named(fake_cache):
    root, folder = fake_cache
    result = check(root)
    assert result.returncode == 0 and result.stdout.strip() == str(folder / "kube-router")


def test_a_missing_stamp_means_a_partial_build(fake_cache):
    root, folder = fake_cache
    (folder / ".complete").unlink()
    assert check(root).returncode == 1


def test_another_version_is_not_trusted(fake_cache):
    root, folder = fake_cache
    (folder / "kube-router").unlink()
    (folder / "kube-router").write_text("#!/bin/sh\necho 'Running kube-router version v2.0.0, built on' >&2\nexit 1\n")
    (folder / "kube-router").chmod(0o755)
    assert check(root).returncode == 1
