"""One source per rule (issue #36): where a rule is written in more than one file, the copies agree.

The CRD (crds/) is the API's source of each rule; the operator says it again in
Python (model/), the chart in values.schema.json and values.yaml, and a chart
script where the pods act on it. None of these files can import another, so
each copy is held here to the source: the patterns and defaults as text, and a
table of examples judged by every copy. No cluster and no helm: the scripts run
under sh, the patterns under Python's re (the CRD's regexes are written to read
alike in RE2, ECMA-262 and Python: tests/unit/test_crd_schema.py)."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from mydb_operator import names
from mydb_operator.desired.platform import parse_platform
from mydb_operator.desired.values import database_values, postgres_port
from mydb_operator.model.cron import CRON_SHORTCUTS
from mydb_operator.model.errors import SpecError
from mydb_operator.model.quantity import QUANTITY_PATTERN, parse_quantity
from mydb_operator.model.retention import (
    RETENTION_DEFAULT,
    RETENTION_MAX_LENGTH,
    RETENTION_PATTERN,
    RETENTION_PATTERN_TEXT,
    retention_seconds,
)
from mydb_operator.model.spec import (
    MAX_AUTO_GROW_INTERVAL_SECONDS,
    MAX_AUTO_GROW_THRESHOLD,
    MAX_FAILOVER_DELAY_SECONDS,
    MAX_REPLICAS,
    MIN_AUTO_GROW_THRESHOLD,
    MIN_REPLICAS,
    MIN_STORAGE,
    parse_spec,
)
from mydb_operator.model.versions import VERSION_PATTERN
from mydb_operator.model.timestamps import rfc3339
from mydb_operator.policy.archive import base_backups

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "mydatabases.myapp.example.com.yaml"
CHART = ROOT / "charts" / "mydatabase"
PRUNE = CHART / "scripts" / "prune.sh"
# A hang guard, not a time limit: under make test these tests run on the CPU the e2e pass leaves
# (hack/background.py).
HANG_SECONDS = 900


@pytest.fixture(scope="module")
def crd() -> dict:
    (v1,) = yaml.safe_load(CRD_PATH.read_text())["spec"]["versions"]
    return v1["schema"]["openAPIV3Schema"]["properties"]["spec"]


@pytest.fixture(scope="module")
def chart() -> dict:
    return yaml.safe_load((CHART / "values.schema.json").read_text())


@pytest.fixture(scope="module")
def chart_defaults() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def at(schema: dict, dotted: str) -> dict:
    for part in dotted.split("."):
        schema = schema["properties"][part]
    return schema


def cel_patterns(schema: dict) -> list[str]:
    """The regexes of the field's CEL rules that are one self.matches('...')."""
    rules = [r["rule"].strip() for r in schema.get("x-kubernetes-validations", [])]
    return [m.group(1) for rule in rules if (m := re.fullmatch(r"self\.matches\('([^']*)'\)", rule))]


def accepts(schema: dict, value: str) -> bool:
    """As a JSON schema (and the API server's OpenAPI) judges a string: pattern and maxLength."""
    assert "\n" not in value  # Python's $ would match before a final newline; RE2 and ECMA-262 do not
    if len(value) > schema.get("maxLength", len(value)):
        return False
    return re.search(schema["pattern"], value) is not None


def spec_with(**backup: str) -> dict:
    return {"replicas": 1, "version": "15.2", "storage": "1Gi", "backup": {"schedule": "0 2 * * *", **backup}}


def operator_accepts(spec: dict) -> bool:
    try:
        parse_spec(spec)
    except SpecError:
        return False
    return True


# ---------------------------------------------------------------- retention

# (value, what the CRD says): every copy of the rule must say the same.
RETENTIONS = [
    ("7d", True),
    ("12h", True),
    ("1w", True),
    ("4w", True),
    ("1h", True),
    ("52w", True),
    ("9999999w", True),  # the longest the CRD takes
    ("0d", False),  # the chart's schema took it once; the CRD never did
    ("0h", False),
    ("07d", False),
    ("10000000d", False),  # longer than maxLength
    ("7", False),
    ("7m", False),
    ("7 d", False),
    ("d", False),
    ("-1d", False),
    ("7D", False),
    ("7dd", False),
    ("bogus", False),
    ("", False),
]


def prune_pattern() -> str:
    (found,) = re.findall(r"^RETENTION_PATTERN='([^']*)'$", PRUNE.read_text(), re.M)
    return found


def prune_accepts(tmp_path: Path, retention: str) -> bool:
    """prune.sh on an empty backups directory: it refuses a retention before it looks at any file."""
    backups = tmp_path / "empty"
    backups.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "BACKUP_DIR": str(backups), "BACKUP_RETENTION": retention, "NOW": "0"}
    result = subprocess.run(["sh", str(PRUNE)], env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    return result.returncode == 0


def test_the_retention_rule_is_the_crds_in_every_file(crd, chart, chart_defaults):
    """One pattern, one maxLength, one default: the CRD's, written again (as text) by the CRD's CEL rule, the
    chart's schema, prune.sh and model/retention.py; the defaults of the CRD, the chart and the operator."""
    source = at(crd, "backup.retention")
    assert source["pattern"] == RETENTION_PATTERN_TEXT == RETENTION_PATTERN.pattern
    assert cel_patterns(source) == [RETENTION_PATTERN_TEXT]
    assert at(chart, "backup.retention")["pattern"] == RETENTION_PATTERN_TEXT
    assert prune_pattern() == RETENTION_PATTERN_TEXT
    assert source["maxLength"] == at(chart, "backup.retention")["maxLength"] == RETENTION_MAX_LENGTH
    assert source["default"] == RETENTION_DEFAULT == chart_defaults["backup"]["retention"]
    assert parse_spec(spec_with()).backup.retention == RETENTION_DEFAULT


@pytest.mark.parametrize("value, valid", RETENTIONS)
def test_every_copy_of_the_retention_rule_judges_alike(crd, chart, tmp_path, value, valid):
    """The CRD (pattern, maxLength, CEL rule), the chart's schema, the operator's parser, the Python keep-window
    and prune.sh take and refuse the same retentions. prune.sh checks the pattern only: the length is the
    chart schema's to refuse, and the script gets only what the schema let through."""
    source = at(crd, "backup.retention")
    assert accepts(source, value) is valid
    by_pattern = RETENTION_PATTERN.fullmatch(value) is not None  # what is left once the length is fine
    assert all(re.search(p, value) for p in cel_patterns(source)) is by_pattern
    assert accepts(at(chart, "backup.retention"), value) is valid
    assert operator_accepts(spec_with(retention=value)) is valid
    try:
        retention_seconds(value)
    except ValueError:
        assert not valid
    else:
        assert valid
    assert prune_accepts(tmp_path, value) is by_pattern


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


@pytest.mark.parametrize("retention", ["1h", "12h", "1d", "7d", "2w", "9999999w"])
def test_prune_sh_and_the_status_keep_the_same_backups(tmp_path, retention):
    """The keep-window is written twice: prune.sh deletes the backups, policy/archive.py's base_backups says in
    status which are left (the recovery window starts at the first). On the same backups at the same moment,
    both keep the same base backups: older than the retention goes (exactly the retention stays), but the newest
    always stays, and so does the newest one older than the retention (the window's first moments recover from
    it). Dumps are kept by the retention alone (and the newest)."""
    now = datetime(2026, 3, 10, 2, 0, 0, tzinfo=UTC)
    seconds = retention_seconds(retention)
    ages = {60, 3600, 86400, 3 * 86400, 30 * 86400, 400 * 86400}
    if seconds < 10 * 365 * 86400:
        ages |= {seconds - 1, seconds, seconds + 1, 2 * seconds}
    taken = sorted(now - timedelta(seconds=age) for age in ages)
    backups = tmp_path / "backups"
    (backups / "base").mkdir(parents=True)
    for moment in taken:
        (backups / f"{stamp(moment)}.dump").write_text("dump")
        (backups / "base" / stamp(moment)).mkdir()
        (backups / "base" / stamp(moment) / "info").write_text("start_wal=000000010000000000000001\n")
    env = {"PATH": os.environ["PATH"], "BACKUP_DIR": str(backups), "BACKUP_RETENTION": retention,
           "NOW": str(int(now.timestamp()))}  # no archive directory: the WAL step has nothing to do
    result = subprocess.run(["sh", str(PRUNE)], env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert result.returncode == 0, result.stderr

    by_prune_sh = sorted(p.name for p in (backups / "base").iterdir())
    dumps_by_prune_sh = sorted(p.name.removesuffix(".dump") for p in backups.glob("*.dump"))
    by_status = base_backups([rfc3339(t) for t in taken], None, None, retention, now)
    by_python = [stamp(datetime.fromisoformat(t)) for t in by_status]
    assert by_python == by_prune_sh
    assert by_prune_sh[-1] == dumps_by_prune_sh[-1] == stamp(taken[-1])  # the newest, whatever its age
    if seconds < 10 * 365 * 86400:
        assert stamp(now - timedelta(seconds=seconds)) in by_prune_sh
        assert stamp(now - timedelta(seconds=seconds + 1)) in by_prune_sh  # the newest before the window
        assert stamp(now - timedelta(seconds=2 * seconds)) not in by_prune_sh
        assert stamp(now - timedelta(seconds=seconds)) in dumps_by_prune_sh
        assert stamp(now - timedelta(seconds=seconds + 1)) not in dumps_by_prune_sh
        assert by_prune_sh == sorted([*dumps_by_prune_sh, stamp(now - timedelta(seconds=seconds + 1))])


# ---------------------------------------------------------------- the PostgreSQL port


def test_the_charts_default_port_is_the_operators(chart_defaults):
    """names.POSTGRES_PORT is the bundled chart's default: what the operator names when no values set a port.
    The scripts' own fallbacks (a PGPORT the chart always sets) say the same."""
    assert chart_defaults["postgresql"]["port"] == names.POSTGRES_PORT
    assert postgres_port(chart_defaults) == names.POSTGRES_PORT
    fallbacks = {
        (script.name, found)
        for script in (CHART / "scripts").glob("*.sh")
        for found in re.findall(r"PGPORT:-([0-9]+)", script.read_text())
    }
    assert fallbacks and {port for _, port in fallbacks} == {str(names.POSTGRES_PORT)}, fallbacks


def test_the_chart_serves_the_port_the_operator_names(render):
    """The operator's values under a platform that sets postgresql.port, through the real chart: every
    Service, the server's container and every PGPORT use the port the operator puts in status.endpoints and
    the Secret's URIs (desired/values.postgres_port)."""
    spec = parse_spec(spec_with(retention="7d"))
    values = database_values("db", spec, parse_platform({"values": {"postgresql": {"port": 6543}}}))
    port = postgres_port(values)
    assert port == 6543
    rendered = render(values, release="db", namespace="ns")
    services = rendered.kinds("Service")
    assert {s["metadata"]["name"] for s in services} == set(names.release_services("db"))
    assert all([p["port"] for p in s["spec"]["ports"]] == [port] for s in services)
    pod = rendered.get("StatefulSet", "db")["spec"]["template"]["spec"]
    (server,) = [c for c in pod["containers"] if c["name"] == names.POSTGRES_CONTAINER]
    assert [p["containerPort"] for p in server["ports"]] == [port]
    pgports = [
        env["value"]
        for doc in rendered.docs
        for container in _containers(doc)
        for env in container.get("env") or []
        if env["name"] == "PGPORT"
    ]
    assert pgports and set(pgports) == {str(port)}


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec") or {}
    template = (spec.get("jobTemplate") or {}).get("spec", {}).get("template") or spec.get("template") or {}
    pod = template.get("spec") or (spec if doc["kind"] == "Pod" else {})
    return (pod.get("initContainers") or []) + (pod.get("containers") or [])


# ---------------------------------------------------------------- defaults, bounds and patterns


def crd_defaults(schema: dict, path: str = "") -> dict[str, object]:
    found = {}
    for name, sub in schema.get("properties", {}).items():
        if "default" in sub:
            found[f"{path}{name}"] = sub["default"]
        found.update(crd_defaults(sub, f"{path}{name}."))
    return found


def value_at(values: dict, dotted: str) -> object:
    for part in dotted.split("."):
        values = values[part]
    return values


# Each default the CRD gives: how the operator's parsed spec says it, and the chart value it lands in when the
# operator leaves that value to the chart's values.yaml (None: the operator always passes it, or no such value).
DEFAULTS = {
    "deletionPolicy": (lambda spec: spec.deletion_policy, None),
    "failoverDelay": (lambda spec: spec.failover_delay, None),
    "maxLagOnFailover": (lambda spec: spec.max_lag_on_failover, None),
    "hibernate": (lambda spec: spec.hibernate, None),
    "replication.synchronous": (lambda spec: spec.synchronous, "replication.synchronous"),
    "tls.enabled": (lambda spec: spec.tls, "tls.enabled"),
    "backup.retention": (lambda spec: spec.backup.retention, "backup.retention"),
    "backup.storage": (lambda spec: spec.backup.storage, "backup.storage.size"),
    "backup.continuous": (lambda spec: spec.backup.continuous, "backup.continuous"),
    "backup.verify": (lambda spec: spec.backup.verify, None),
    "restore.backup": (lambda spec: spec.restore.backup, "restore.backup"),
    "storageAutoGrow.thresholdPercent": (lambda spec: spec.auto_grow.threshold_percent, None),
    "storageAutoGrow.increment": (lambda spec: spec.auto_grow.increment, None),
    "storageAutoGrow.intervalSeconds": (lambda spec: spec.auto_grow.interval_seconds, None),
    "application.owner": (lambda spec: spec.application.owner, None),
    "application.database": (lambda spec: spec.application.database, None),
}


def test_every_crd_default_is_the_operators_and_the_charts(crd, chart_defaults):
    """What the API server fills in, `render -f` (the operator's parser) fills in alike, and the chart's
    values.yaml says it too where the operator leaves the value to the chart (backup.continuous is passed only
    when off). A default added to the CRD must join DEFAULTS."""
    defaults = crd_defaults(crd)
    assert set(defaults) == set(DEFAULTS)
    parsed = parse_spec({"replicas": 2, "version": "15.2", "storage": "1Gi",
                         "backup": {"schedule": "@daily"}, "restore": {"fromDatabase": "source"},
                         "storageAutoGrow": {"limit": "2Gi"}})
    for path, (operator_says, chart_path) in DEFAULTS.items():
        assert operator_says(parsed) == defaults[path], path
        if chart_path is not None:
            assert value_at(chart_defaults, chart_path) == defaults[path], chart_path


def test_the_bounds_of_replicas_and_failover_delay(crd, chart):
    """The CRD's minimum and maximum, the operator's (model/spec.py), the chart's replicas (0 as well: it is
    how the operator hibernates) and the 16 names the chart lists in synchronous_standby_names."""
    replicas, delay = at(crd, "replicas"), at(crd, "failoverDelay")
    assert (replicas["minimum"], replicas["maximum"]) == (MIN_REPLICAS, MAX_REPLICAS)
    assert (delay["minimum"], delay["maximum"]) == (0, MAX_FAILOVER_DELAY_SECONDS)
    for count in (MIN_REPLICAS - 1, MIN_REPLICAS, MAX_REPLICAS, MAX_REPLICAS + 1):
        taken = replicas["minimum"] <= count <= replicas["maximum"]
        assert operator_accepts({**spec_with(), "replicas": count}) is taken, count
    for seconds in (-1, 0, MAX_FAILOVER_DELAY_SECONDS, MAX_FAILOVER_DELAY_SECONDS + 1):
        taken = delay["minimum"] <= seconds <= delay["maximum"]
        assert operator_accepts({**spec_with(), "failoverDelay": seconds}) is taken, seconds
    chart_replicas = at(chart, "replicas")
    assert chart_replicas["minimum"] == 0 and chart_replicas.get("maximum", MAX_REPLICAS) >= MAX_REPLICAS
    scripts = (CHART / "templates" / "configmap-scripts.yaml").read_text()
    (named,) = re.findall(r"until \(max ([0-9]+) \(int \.Values\.replicas\)", scripts)
    assert int(named) == MAX_REPLICAS


def test_the_bounds_of_storage_auto_grow(crd):
    """thresholdPercent and intervalSeconds: the CRD's minimum and maximum are the operator's (model/spec.py)."""
    threshold, interval = at(crd, "storageAutoGrow.thresholdPercent"), at(crd, "storageAutoGrow.intervalSeconds")
    assert (threshold["minimum"], threshold["maximum"]) == (MIN_AUTO_GROW_THRESHOLD, MAX_AUTO_GROW_THRESHOLD)
    assert (interval["minimum"], interval["maximum"]) == (0, MAX_AUTO_GROW_INTERVAL_SECONDS)
    for field, bounds in (("thresholdPercent", threshold), ("intervalSeconds", interval)):
        for value in (bounds["minimum"] - 1, bounds["minimum"], bounds["maximum"], bounds["maximum"] + 1):
            taken = bounds["minimum"] <= value <= bounds["maximum"]
            spec = {**spec_with(), "storageAutoGrow": {"limit": "2Gi", field: value}}
            assert operator_accepts(spec) is taken, (field, value)


def test_the_patterns_the_chart_repeats(crd, chart, chart_defaults):
    """restore.backup and the Secret names (the chart's also takes "", its unset default); the chart's
    quantity is the CRD's resources quantity without a sign; the chart's default image tag is a version the
    CRD and the operator take."""
    assert at(chart, "restore.backup")["pattern"] == at(crd, "restore.backup")["pattern"]
    for secret in ("credentials.secretName", "tls.secretName"):
        secret_name = at(crd, secret)
        assert at(chart, secret)["pattern"] == "^$|" + secret_name["pattern"], secret
        assert at(chart, secret)["maxLength"] == secret_name["maxLength"], secret
    quantity = at(crd, "resources.limits")["additionalProperties"]["pattern"]
    assert quantity.startswith("^(\\+|-)?")
    assert chart["definitions"]["quantity"]["pattern"] == "^" + quantity.removeprefix("^(\\+|-)?")
    assert QUANTITY_PATTERN.pattern == quantity  # what the operator's parser reads
    tag = chart_defaults["image"]["tag"]
    assert re.search(at(crd, "version")["pattern"], tag) and VERSION_PATTERN.match(tag)


SIZES = ["1Gi", "100Gi", "1Mi", "1.5Gi", "500M", "1G", "1e9", ".5Gi", "1048576", "1Ki", "1023Ki", "0", "-1Gi",
         "lots", "1 Gi", "1GB", "Gi", ""]


@pytest.mark.parametrize("field", ["storage", "backup.storage"])
def test_a_size_the_crd_takes_the_operator_and_the_chart_take(crd, chart, field):
    """The CRD takes a Kubernetes quantity (CEL isQuantity: the grammar of its resources pattern) of at least
    its floor; the operator takes the same (model/spec.py MIN_STORAGE), and the chart's quantity takes at least
    those, so an admitted size never fails at Helm."""
    rules = [r["rule"] for r in at(crd, field)["x-kubernetes-validations"]]
    (floor,) = {m for rule in rules for m in re.findall(r"compareTo\(quantity\('([^']+)'\)\)", rule)}
    assert floor == MIN_STORAGE
    grammar = at(crd, "resources.limits")["additionalProperties"]["pattern"]
    for size in SIZES:
        taken = bool(re.search(grammar, size)) and parse_quantity(size) >= parse_quantity(floor)
        spec = {**spec_with(), "storage": size} if field == "storage" else spec_with(storage=size)
        assert operator_accepts(spec) is taken, size
        if taken:
            assert re.search(chart["definitions"]["quantity"]["pattern"], size), size


def test_the_charts_schedule_takes_every_schedule_the_crd_takes(crd, chart):
    """The chart's schedule pattern is looser than the CRD's cron language (tests/cron_schedules.yaml holds the
    CRD and the operator to it): every schedule those take, the chart takes, and the @shortcuts are the same."""
    cases = yaml.safe_load((ROOT / "tests" / "cron_schedules.yaml").read_text())
    (crd_regex,) = [p for p in cel_patterns(at(crd, "backup.schedule")) if p.startswith("^(@")]
    chart_regex = at(chart, "backup.schedule")["pattern"]
    for schedule in cases["accepted"]:
        assert re.search(crd_regex, schedule) and operator_accepts(spec_with(schedule=schedule)), schedule
        assert re.search(chart_regex, schedule), schedule
    shortcuts = {f"@{name}" for name in re.match(r"\^\(@\(([a-z|]+)\)", crd_regex).group(1).split("|")}
    assert shortcuts == {f"@{name}" for name in re.match(r"\^\(@\(([a-z|]+)\)", chart_regex).group(1).split("|")}
    assert shortcuts == set(CRON_SHORTCUTS)
