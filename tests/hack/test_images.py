"""hack/images.sh's pure parts, run by sourcing the script (no image is built).

* Which Debian mirror the base image is made from: read from the host's apt
  sources, in either format, ignoring comments and files apt does not read.
* What counts as the operator image's sources: a rebuild takes minutes, so
  the digest must change with every file the Dockerfile can copy (committed
  or not) and with nothing else, and must not depend on where the checkout is
  (CI builds in a fresh clone elsewhere).
* The Dockerfile's bases are the ones the script builds stand-ins for.
* One function builds every Debian base, one every PostgreSQL major: the
  tables saying which image is built with which suite or major agree with
  each other, the suite reaches the apt sources and the debootstrap tarball
  (one kept per suite), and an image's inputs hash follows its arguments.
* `list` keeps the keys the tests read (POSTGRES_IMAGE, ...) and adds the
  PostgreSQL 17 ones (checked with a stand-in buildah that knows a few images).
"""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "images.sh"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def run(function: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run one function of hack/images.sh in a bash that sourced it."""
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && {function} "$@"', "images.sh", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )


def call(function: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> str:
    """run(), which must succeed: its output."""
    result = run(function, *args, cwd=cwd, env=env)
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


# ------------------------------------------------- one build per suite and major

def tables() -> dict[str, dict[str, str]]:
    """KEY -> its ref, build (function and arguments) and bases, in build order."""
    script = (
        'for key in "${ORDER[@]}"; do '
        'printf "%s|%s|%s|%s\\n" "$key" "${REF[$key]}" "${BUILD[$key]}" "${BASES[$key]:-}"; done; true'
    )
    rows = [line.split("|") for line in call(script).splitlines()]
    return {key: {"ref": ref, "build": build, "bases": bases} for key, ref, build, bases in rows}


def test_every_image_has_a_build_function_and_comes_after_its_bases():
    images = tables()
    assert list(images)[:4] == ["debian", "debian-trixie", "postgres", "postgres-17"]
    seen: set[str] = set()
    for key, image in images.items():
        call("declare -F", f"build_{image['build'].split()[0]}")
        assert set(image["bases"].split()) <= seen, key
        seen.add(key)


def test_each_postgres_major_is_built_on_the_base_of_the_suite_that_packages_it():
    images = tables()
    debian = {}
    for key, image in images.items():
        function, *args = image["build"].split()
        if function == "debian":
            (suite,) = args
            assert image["ref"] == f"localhost/mydb/debian:{suite}"
            debian[suite] = key
    assert debian == {"bookworm": "debian", "trixie": "debian-trixie"}
    postgres = {}
    for key, image in images.items():
        function, *args = image["build"].split()
        if function == "postgres":
            major, suite = args
            assert image["ref"] == f"localhost/mydb/postgres:{major}"
            assert image["bases"] == debian[suite], key  # so its inputs hash follows that base
            postgres[major] = suite
    assert postgres == {"15": "bookworm", "17": "trixie"}


def test_the_containerfile_takes_its_base_and_major_as_build_arguments():
    text = (REPO / "hack" / "images" / "postgres" / "Containerfile").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[:3] == ["ARG BASE", "ARG PG_MAJOR", "FROM ${BASE}"]
    assert "ARG PG_MAJOR" in lines[3:]  # an ARG before FROM is not seen after it
    assert [line for line in lines if line.startswith("FROM")] == ["FROM ${BASE}"]


SOURCES = (
    "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\n"
    "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n"
)


@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_sources_name_the_image_suite_not_the_host_one(tmp_path, suite):
    env = apt_dir(tmp_path, {"sources.list.d/debian.sources": SOURCES})
    call("write_sources", suite, str(tmp_path / "out.sources"), env=env)
    keyring = "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    assert (tmp_path / "out.sources").read_text() == (
        f"Types: deb\nURIs: http://mirror.example/debian\nSuites: {suite} {suite}-updates\n"
        f"Components: main\n{keyring}\n\n"
        f"Types: deb\nURIs: http://security.example/debian-security\nSuites: {suite}-security\n"
        f"Components: main\n{keyring}\n"
    )


def test_sources_without_a_security_mirror(tmp_path):
    env = apt_dir(tmp_path, {"sources.list": "deb http://mirror.example/debian bookworm main\n"})
    call("write_sources", "trixie", str(tmp_path / "out.sources"), env=env)
    text = (tmp_path / "out.sources").read_text()
    assert "Suites: trixie trixie-updates\n" in text
    assert "security" not in text


FAKE_DEBOOTSTRAP = """#!/bin/sh
# debootstrap --variant=minbase --include=ca-certificates SUITE ROOTFS MIRROR
echo "$@" >> "$DEBOOTSTRAP_CALLS"
mkdir -p "$4/etc" "$4/proc/self"
echo "$3" > "$4/etc/debian_version"
"""


def stand_in(tmp_path: Path, name: str, script: str) -> Path:
    """An executable NAME running SCRIPT in tmp_path/bin; returns that folder (to put first on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(script)
    (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def bootstrap_env(tmp_path):
    """MYDB_CACHE in tmp_path and a stand-in debootstrap that logs its calls."""
    bin_dir = stand_in(tmp_path, "debootstrap", FAKE_DEBOOTSTRAP)
    (tmp_path / "cache" / "images").mkdir(parents=True)
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
            "MYDB_CACHE": str(tmp_path / "cache"), "DEBOOTSTRAP_CALLS": str(tmp_path / "calls")}


def tarball_name(suite: str, mirror: str) -> str:
    # The name the cache already has for bookworm: another would debootstrap again.
    digest = hashlib.sha256(f"{suite} {mirror}\n".encode()).hexdigest()[:12]
    return f"debian-{suite}-{digest}.tar"


def test_debian_tarball_is_made_once_per_suite_and_mirror(bootstrap_env, tmp_path):
    work = tmp_path / "cache" / "images"
    mirror = "http://mirror.example/debian"
    bookworm = call("debian_tarball", "bookworm", mirror, env=bootstrap_env)
    trixie = call("debian_tarball", "trixie", mirror, env=bootstrap_env)
    assert bookworm == str(work / tarball_name("bookworm", mirror))
    assert trixie == str(work / tarball_name("trixie", mirror))
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"--variant=minbase --include=ca-certificates {suite} {work}/rootfs {mirror}"
                     for suite in ("bookworm", "trixie")]
    listing = subprocess.run(["tar", "-tf", trixie], capture_output=True, text=True, check=True).stdout
    assert "./etc/debian_version" in listing.splitlines()
    assert "./proc/self/" not in listing.splitlines()
    assert not (work / "rootfs").exists()
    # Both kept: the next build of either suite debootstraps nothing.
    assert call("debian_tarball", "bookworm", mirror, env=bootstrap_env) == bookworm
    assert len((tmp_path / "calls").read_text().splitlines()) == 2


def test_debian_tarball_of_another_mirror_replaces_only_its_own_suite(bootstrap_env, tmp_path):
    work = tmp_path / "cache" / "images"
    old, new = "http://old.example/debian", "http://new.example/debian"
    old_bookworm = call("debian_tarball", "bookworm", old, env=bootstrap_env)
    trixie = call("debian_tarball", "trixie", old, env=bootstrap_env)
    new_bookworm = call("debian_tarball", "bookworm", new, env=bootstrap_env)
    assert new_bookworm != old_bookworm
    assert sorted(p.name for p in work.glob("*.tar")) == sorted([Path(new_bookworm).name, Path(trixie).name])


FAKE_BUILDAH = """#!/bin/sh
# A stand-in for buildah that knows the images of $FAKE_IMAGES ("NAME:TAG ID" lines).
command=$1
shift
case "$command" in
  inspect)
    for ref; do :; done
    case "$*" in *FromImageID*) ;; *) exit 0 ;; esac  # labels: none
    awk -v ref="$ref" '$1 == ref { print $2; found = 1 } END { exit !found }' "$FAKE_IMAGES" ;;
  images)
    for arg; do case "$arg" in id=*) id=${arg#id=} ;; esac; done
    awk -v id="$id" '$2 == id { print $1 }' "$FAKE_IMAGES" ;;
  *) echo "fake buildah: $command" >&2; exit 1 ;;
esac
"""

IMAGES = {
    "localhost/mydb/postgres:15.20": "id15", "localhost/mydb/postgres:15": "id15",
    "localhost/mydb/postgres:17.12": "id17", "localhost/mydb/postgres:17": "id17",
    "localhost/mydb/debian:bookworm": "idbookworm", "localhost/mydb/debian:trixie": "idtrixie",
}


@pytest.fixture
def buildah_env(tmp_path):
    """A stand-in buildah on PATH that knows IMAGES (tmp_path/images)."""
    bin_dir = stand_in(tmp_path, "buildah", FAKE_BUILDAH)
    (tmp_path / "images").write_text("".join(f"{name} {id_}\n" for name, id_ in IMAGES.items()))
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
            "FAKE_IMAGES": str(tmp_path / "images")}


def test_postgres_version_is_the_other_tag_of_each_major(buildah_env):
    assert call("postgres_version", "15", env=buildah_env) == "15.20"
    assert call("postgres_version", "17", env=buildah_env) == "17.12"
    assert call("postgres_version", "16", env=buildah_env) == ""


def test_list_keeps_the_keys_tests_read_and_adds_postgres_17(buildah_env):
    listed = dict(line.split("=", 1) for line in call("list", env=buildah_env).splitlines())
    version = call('echo "$OPERATOR_VERSION"')
    assert listed == {
        "DEBIAN_IMAGE": "mydb/debian:bookworm",
        "DEBIAN_TRIXIE_IMAGE": "mydb/debian:trixie",
        "POSTGRES_IMAGE": "library/postgres:15.20",
        "POSTGRES_MAJOR_IMAGE": "library/postgres:15",
        "POSTGRES17_IMAGE": "library/postgres:17.12",
        "POSTGRES17_MAJOR_IMAGE": "library/postgres:17",
        "PAUSE_IMAGE": "mydb/pause:1.0",
        "OPERATOR_IMAGE": f"mydb/mydatabase-operator:{version}",
        "POSTGRES_STANDIN_15_2": "library/postgres:15.2",
        "POSTGRES_STANDIN_15_3": "library/postgres:15.3",
        "POSTGRES_VERSION": "15.20",
        "POSTGRES17_VERSION": "17.12",
    }


def test_each_published_name_comes_from_its_own_local_image(buildah_env):
    rows = [line.split() for line in call("published", env=buildah_env).splitlines()]
    local = {name: ref for _, ref, name in rows}
    assert local["library/postgres:17.12"] == "localhost/mydb/postgres:17.12"
    assert local["library/postgres:17"] == "localhost/mydb/postgres:17"
    assert local["library/postgres:15.2"] == "localhost/mydb/postgres:15"  # the stand-ins are 15's
    assert local["mydb/debian:trixie"] == "localhost/mydb/debian:trixie"


def test_list_fails_clearly_without_the_postgres_17_image(buildah_env, tmp_path):
    (tmp_path / "images").write_text("localhost/mydb/postgres:15.20 id15\nlocalhost/mydb/postgres:15 id15\n")
    result = run("list", env=buildah_env)
    assert result.returncode != 0
    assert result.stdout == ""
    assert "no localhost/mydb/postgres:17 image: run hack/images.sh build first" in result.stderr


def test_inputs_hash_follows_the_suite_and_the_major(buildah_env):
    keys = ("debian", "debian-trixie", "postgres", "postgres-17")
    hashes = {key: call("inputs_hash", key, env=buildah_env) for key in keys}
    assert len(set(hashes.values())) == len(keys)
    assert "arguments trixie" in call("inputs_of", "debian-trixie", env=buildah_env).splitlines()
    assert "arguments 17 trixie" in call("inputs_of", "postgres-17", env=buildah_env).splitlines()
    assert call("inputs_hash", "postgres-17", env=buildah_env) == hashes["postgres-17"]
