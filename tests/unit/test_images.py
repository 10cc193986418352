"""hack/images.sh's pure parts, run by sourcing the script (no image is built).

* Which Debian mirror the base image is made from: read from the host's apt
  sources, in either format, ignoring comments and files apt does not read.
* What counts as the operator image's sources: a rebuild takes minutes, so
  the digest must change with every file the Dockerfile can copy (committed
  or not) and with nothing else, and must not depend on where the checkout is
  (CI builds in a fresh clone elsewhere).
* The Dockerfile's bases are the ones the script builds stand-ins for.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "images.sh"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def call(function: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> str:
    """Run one function of hack/images.sh in a bash that sourced it."""
    result = subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && {function} "$@"', "images.sh", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def apt_dir(tmp_path: Path, files: dict[str, str]) -> dict:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "APT_DIR": str(tmp_path)}


def test_mirrors_come_from_deb822_sources_not_from_their_comments(tmp_path):
    env = apt_dir(tmp_path, {
        "sources.list.d/debian.sources": (
            "Types: deb\n"
            "# URIs: http://old.example/debian\n"
            "URIs: http://mirror.example/debian/\n"
            "Suites: bookworm bookworm-updates\n\n"
            "Types: deb\n"
            "URIs: http://security.example/debian-security\n"
            "Suites: bookworm-security\n"
        ),
        # apt reads only *.list and *.sources (this one would sort first)
        "sources.list.d/a.sources.disabled": "URIs: http://elsewhere.example/debian\n",
    })
    assert call("debian_mirror", env=env) == "http://mirror.example/debian"
    assert call("security_mirror", env=env) == "http://security.example/debian-security"


def test_mirrors_come_from_one_line_sources_with_options(tmp_path):
    env = apt_dir(tmp_path, {
        "sources.list": (
            "# deb http://commented.example/debian bookworm main\n"
            "deb [signed-by=/usr/share/keyrings/x.gpg] https://deb.example/debian bookworm main\n"
        ),
        "sources.list.d/vendor.list": "deb https://vendor.example/apt stable main\n",
    })
    assert call("debian_mirror", env=env) == "https://deb.example/debian"
    assert call("security_mirror", env=env) == ""


@pytest.fixture
def checkout(tmp_path):
    """A small git repository laid out like this one."""
    repo = tmp_path / "repo"
    (repo / "operator" / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "Dockerfile").write_text("FROM scratch\n")
    (repo / "operator" / "pkg" / "a.py").write_text("A = 1\n")
    (repo / "tests" / "test_a.py").write_text("\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], cwd=repo, check=True)
    return repo


def digest(repo: Path) -> str:
    return call("source_digest", "Dockerfile", "operator", cwd=repo)


def test_source_digest_follows_every_file_the_build_can_copy(checkout):
    first = digest(checkout)
    (checkout / "operator" / "pkg" / "a.py").write_text("A = 2\n")  # uncommitted edit
    edited = digest(checkout)
    assert edited != first
    (checkout / "operator" / "pkg" / "new.py").write_text("\n")  # untracked file
    added = digest(checkout)
    assert added != edited
    (checkout / "operator" / "pkg" / "a.py").unlink()  # deleted, still in the index
    assert digest(checkout) != added


def test_source_digest_ignores_what_the_build_does_not_copy(checkout):
    first = digest(checkout)
    (checkout / "operator" / "pkg" / "__pycache__").mkdir()
    (checkout / "operator" / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (checkout / "tests" / "test_a.py").write_text("x = 1\n")
    assert digest(checkout) == first


def test_source_digest_does_not_depend_on_where_the_checkout_is(checkout, tmp_path):
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "clone", "-q", str(checkout), str(clone)], check=True)
    assert digest(clone) == digest(checkout)


def test_the_dockerfile_uses_only_bases_the_script_stands_in_for():
    call("check_dockerfile_bases")
