"""The operator's settings, as one frozen Config, and the one reading of a yes/no word.

commands/settings.py's `load(args, environ)` is the only place that reads the
flags and the environment (MYDB_*): it builds one Config and the CLI passes it on
(to the start-up check, then to the handlers through kopf's memo). Nothing reads
settings from a global or from os.environ. The defaults below are the documented
ones (docs/install.md, Settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# The bundled chart, found beside the package in a checkout or an image built from it.
BUNDLED_CHART = Path(__file__).resolve().parents[2] / "charts" / "mydatabase"

# The words a yes/no setting takes (any case, surrounding blanks ignored), for a flag and a variable alike.
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
LOG_FORMATS = ("text", "json")
BOOL_EXPECTED = f"expected true or false: one of {', '.join(TRUE_WORDS)} or {', '.join(FALSE_WORDS)} (any case)"


class SettingError(ValueError):
    """A setting's value cannot be used; the message names the flag or variable and what it accepts."""


def parse_bool(name: str, text: str) -> bool:
    """A yes/no setting: one of TRUE_WORDS or FALSE_WORDS, any case. `name` (a flag or a variable) is
    for the message. Pure."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SettingError(f"{name}={text!r}: {BOOL_EXPECTED}")


@dataclass(frozen=True)
class Config:
    """One command's settings: the flags over the environment over these defaults (commands/settings.py)."""

    command: str = "run"  # run, render or values
    # The chart: a directory or oci://HOST/PATH/NAME, its version (an OCI chart's only), and plain HTTP.
    chart: str = str(BUNDLED_CHART)
    chart_version: str | None = None
    chart_plain_http: bool = False
    # The chart as a directory: the one given, or the OCI chart pulled at start-up.
    # None only for an OCI chart a command does not need (values).
    chart_dir: Path | None = BUNDLED_CHART
    # How messages name the chart: its directory, or oci://HOST/PATH/NAME version V it was pulled from
    # ("": chart_dir).
    chart_origin: str = ""
    helm: str = "helm"
    platform_config: Path | None = None
    # The environment the operator's subprocesses (Helm) start from: the operator's own, passed in
    # explicitly. Left out of repr (it may hold credentials) and of the hash (a dict).
    environment: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    # run
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    resync_seconds: float = 60.0
    metrics_port: int = 9090  # 0: off
    health_port: int = 8080  # 0: off
    log_format: str = "text"
    helm_parallel: int = 2
    # New databases rolling out at once (reconcile/pacing.py); 0 turns pacing off.
    rollout_window: int = 16
    history_max: int = 5  # Helm's revisions kept per release; not a setting
    leader_elect: bool = True
    leader_lease_name: str = "mydb-operator"
    # None: the pod's service-account namespace, else the kubeconfig context's, else "default" (at election).
    leader_lease_namespace: str | None = None
    leader_lease_seconds: int = 15
    identity: str = ""  # this instance's name (the Lease holder, kopf's identity): POD_NAME, else host-pid
    # Where this instance runs when it runs in a pod (POD_NAMESPACE, else its service account's); None outside
    # the cluster. The databases' NetworkPolicy admits its pods there (desired/platform.admitting_operator).
    operator_namespace: str | None = None
    # render and values
    manifest: str = "-"  # the MyDatabase file, - for stdin
    render_namespace: str | None = None
