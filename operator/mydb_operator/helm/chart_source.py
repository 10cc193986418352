"""Where the operator's chart comes from: a directory, or an OCI reference pulled once at start-up.

A platform team can ship its own chart version without rebuilding the operator
image: `--chart oci://HOST/PATH/NAME --chart-version V [--chart-plain-http]`.
The chart is pulled once (`helm pull --untar`) into a fresh directory and from
then on is a chart directory like any other: checked at start-up, digested,
templated and upgraded the same way.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import last_line

OCI_SCHEME = "oci://"
# HOST[:PORT] then at least one repository path component, the last being the chart's name
# (the OCI distribution spec's grammar for components: lowercase, digits, separators inside).
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
OCI_REFERENCE = re.compile(rf"{_HOST}(?:/{_COMPONENT})+")
PULL_TIMEOUT_SECONDS = 120.0


class ChartSourceError(Exception):
    """The chart settings are wrong or the chart cannot be pulled; the message says which and why."""


@dataclass(frozen=True)
class ChartSource:
    location: str  # a chart directory, or oci://HOST/PATH/NAME
    version: str | None = None  # required for (and only for) an OCI reference
    plain_http: bool = False  # an OCI registry served over HTTP

    @property
    def is_oci(self) -> bool:
        return is_oci(self.location)

    def __str__(self) -> str:
        return f"{self.location} version {self.version}" if self.is_oci else self.location


def is_oci(location: str) -> bool:
    return location.startswith(OCI_SCHEME)


def chart_name(reference: str) -> str:
    """The chart's name in an oci://HOST/PATH/NAME reference, which must carry no tag or digest. Pure."""
    rest = reference.removeprefix(OCI_SCHEME)
    last = rest.partition("/")[2].rsplit("/", 1)[-1]
    if is_oci(reference) and ("@" in last or ":" in last):
        raise ChartSourceError(
            f"{reference}: give the chart's version with --chart-version "
            "(or MYDB_CHART_VERSION), not as a tag or digest in the reference"
        )
    if not is_oci(reference) or not OCI_REFERENCE.fullmatch(rest):
        raise ChartSourceError(
            f"{reference}: not an OCI chart reference: expected oci://HOST[:PORT]/PATH/NAME (lowercase path components)"
        )
    return last


def from_settings(location: str, version: str | None, plain_http: bool) -> ChartSource:
    """The chart source the settings name (commands/settings.py resolved the flags and MYDB_CHART_DIR /
    MYDB_CHART_VERSION / MYDB_CHART_PLAIN_HTTP): checked, not yet pulled. Pure."""
    version = (version or "").strip() or None
    if not is_oci(location):
        if version is not None:
            raise ChartSourceError(
                f"a chart version ({version}) applies only to an oci:// chart, "
                f"and {location} is a directory: the directory's chart is the version"
            )
        return ChartSource(location)
    chart_name(location)  # refuses a malformed reference
    if version is None:
        raise ChartSourceError(f"{location}: an OCI chart needs a version: set --chart-version (or MYDB_CHART_VERSION)")
    return ChartSource(location, version, plain_http)


def pull_argv(helm: str, source: ChartSource, into: Path) -> list[str]:
    """helm pull of exactly this version, unpacked into `into`. Pure."""
    if not source.is_oci or source.version is None:
        raise ValueError(f"not an OCI chart with a version: {source}")
    argv = [helm, "pull", source.location, "--version", source.version, "--untar", "--untardir", str(into)]
    return [*argv, "--plain-http"] if source.plain_http else argv


def cache_root(environ: Mapping[str, str]) -> Path | None:
    """Where pulled charts go: under Helm's cache (writable in the image), else the system's temp dir. Pure."""
    helm_cache = environ.get("HELM_CACHE_HOME")
    return Path(helm_cache) / "mydb-operator-charts" if helm_cache else None


def fetch(source: ChartSource, helm: str, environ: Mapping[str, str]) -> Path:
    """Pull the chart once into a fresh directory (removed when the process exits); return the chart's directory.

    `environ`: helm's environment (the settings' `environment`); HELM_CACHE_HOME there says where."""
    failure = f"cannot pull the chart {source.location} version {source.version}"
    root = cache_root(environ)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"{chart_name(source.location)}-{source.version}")
    try:
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        into = Path(tempfile.mkdtemp(prefix=f"{stem}-", dir=root))
    except OSError as error:
        raise ChartSourceError(f"{failure}: no directory to pull it into: {error}") from None
    atexit.register(shutil.rmtree, into, ignore_errors=True)
    try:
        result = subprocess.run(
            pull_argv(helm, source, into),
            capture_output=True,
            text=True,
            timeout=PULL_TIMEOUT_SECONDS,
            env=dict(environ),
        )
    except FileNotFoundError:
        raise ChartSourceError(f"{failure}: no helm executable {helm!r} (set MYDB_HELM or --helm)") from None
    except subprocess.TimeoutExpired:
        raise ChartSourceError(f"{failure}: helm pull took more than {PULL_TIMEOUT_SECONDS:.0f}s") from None
    if result.returncode != 0:
        raise ChartSourceError(f"{failure}: {last_line(result.stderr) or 'no message'}")
    charts = [path for path in into.iterdir() if (path / "Chart.yaml").is_file()]
    if len(charts) != 1:
        raise ChartSourceError(f"{failure}: helm pull left no single chart in {into}")
    return charts[0]
