"""The external judges: checkov and kube-score on what users deploy.

Two renders are scanned:

  seed      `mydb-operator render -f examples/production-db.yaml`, exactly as the
            dry-run of docs/development.md prints it (no platform config, no -n: namespace default)
  operator  `helm template mydb-operator charts/mydatabase-operator -n mydb-system`,
            the chart's default values, in the namespace docs/install.md installs it to

A finding is (scanner, render, check id, Kind/name). docs/security-review.md lists
every finding that remains, each with the reason it does not apply or `to fix:`
and what will fix it; tests/chart/test_scanners.py fails on a finding it does not
list and on a listed one that no longer occurs.

    .venv/bin/python hack/scan.py      # (make scan) the counts and every finding, as
                                       # rows for docs/security-review.md

The scanners come from hack/build-scanners.sh (make scanners), helm from
hack/build-tools.sh. checkov runs offline: --skip-download, no update check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SEED_CR = REPO / "examples" / "production-db.yaml"
OPERATOR_CHART = REPO / "charts" / "mydatabase-operator"
REVIEW = REPO / "docs" / "security-review.md"
SCANNERS = ("checkov", "kube-score")
RENDERS = ("seed", "operator")
# kube-score's grades (scorecard.Grade); a non-skipped check below ALL_OK is a finding.
KUBE_SCORE_GRADES = {1: "CRITICAL", 5: "WARNING", 7: "ALMOST_OK", 10: "OK"}
TO_FIX = "to fix:"


@dataclass(frozen=True)
class Finding:
    scanner: str
    render: str
    check: str
    object: str  # Kind/name of the rendered document
    message: str

    @property
    def key(self) -> tuple[str, str]:
        return self.check, self.object


@dataclass
class Scan:
    findings: list[Finding]
    counts: dict[str, int]  # checkov: passed/failed/skipped; kube-score: per grade and SKIPPED


# ---------------------------------------------------------------------------
# the renders
# ---------------------------------------------------------------------------


def render(name: str, helm: str, python: str = sys.executable) -> str:
    """The manifests of one render, as text."""
    with tempfile.TemporaryDirectory(prefix="mydb-scan-helm-") as home:
        env = {
            **os.environ,
            "MYDB_HELM": helm,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        for key in ("MYDB_PLATFORM_CONFIG", "MYDB_CHART_DIR", "MYDB_CHART_VERSION"):
            env.pop(key, None)  # the seed as a user renders it, with the bundled chart
        if name == "seed":
            command = [python, "-m", "mydb_operator.cli", "render", "-f", str(SEED_CR)]
        elif name == "operator":
            command = [helm, "template", "mydb-operator", str(OPERATOR_CHART), "-n", "mydb-system"]
        else:
            raise ValueError(f"unknown render {name!r}")
        result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"render {name} failed: {' '.join(command)}\n{result.stderr}")
    return result.stdout


def documents_by_line(text: str) -> list[tuple[int, str]]:
    """(first line, Kind/name) of every document in a multi-document YAML, lines counted from 1."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    start = 1
    for number in range(1, len(lines) + 2):
        if number == len(lines) + 1 or lines[number - 1] == "---":
            doc = yaml.safe_load("\n".join(lines[start - 1 : number - 1]))
            if doc:
                out.append((start, f"{doc['kind']}/{doc['metadata']['name']}"))
            start = number + 1
    return out


# ---------------------------------------------------------------------------
# the scanners
# ---------------------------------------------------------------------------


def run_checkov(checkov: str, manifest: Path, render_name: str) -> Scan:
    # Offline: no vendor metadata, no PyPI version check (both would be network calls).
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "WARNING"}
    command = [
        checkov,
        "-f",
        str(manifest),
        "--framework",
        "kubernetes",
        "-o",
        "json",
        "--quiet",
        "--skip-download",
        "--compact",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({result.returncode}):\n{result.stderr}\n{result.stdout[-2000:]}")
    report = json.loads(result.stdout)
    if isinstance(report, list):  # one entry per framework; only kubernetes was asked for
        report = next(r for r in report if r.get("check_type") == "kubernetes")
    docs = documents_by_line(manifest.read_text())
    findings = []
    for failed in report.get("results", {}).get("failed_checks", []):
        # The document the finding's lines fall in: graph checks (CKV2_*) name a Pod made from a
        # template, with its labels in the name; the lines name the StatefulSet or Deployment.
        first = failed["file_line_range"][0]
        obj = [name for start, name in docs if start <= first][-1]
        findings.append(Finding("checkov", render_name, failed["check_id"], obj, failed["check_name"]))
    summary = report.get("summary", {})
    counts = {key: int(summary.get(key, 0)) for key in ("passed", "failed", "skipped")}
    return Scan(findings, counts)


def kubernetes_minor() -> str:
    """v1.35 from hack/versions.env's KUBERNETES_VERSION: the checks kube-score runs depend on it."""
    text = (REPO / "hack" / "versions.env").read_text()
    version = re.search(r"^KUBERNETES_VERSION=(v\d+\.\d+)", text, re.M)
    assert version, "KUBERNETES_VERSION missing from hack/versions.env"
    return version.group(1)


def run_kube_score(kube_score: str, manifest: Path, render_name: str) -> Scan:
    command = [kube_score, "score", "-o", "json", "--kubernetes-version", kubernetes_minor(), str(manifest)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"kube-score failed ({result.returncode}):\n{result.stderr}")
    findings = []
    counts: Counter[str] = Counter()
    for scored in json.loads(result.stdout):
        obj = f"{scored['type_meta']['kind']}/{scored['object_meta']['name']}"
        for check in scored["checks"]:
            if check["skipped"]:
                counts["SKIPPED"] += 1
                continue
            grade = KUBE_SCORE_GRADES.get(check["grade"], str(check["grade"]))
            counts[grade] += 1
            if check["grade"] < 10:
                said = "; ".join(
                    f"({c['path']}) {c['summary']}" if c["path"] else c["summary"] for c in check["comments"] or []
                )
                findings.append(
                    Finding(
                        "kube-score",
                        render_name,
                        check["check"]["id"],
                        obj,
                        f"{grade}: {said or check['check']['name']}",
                    )
                )
    return Scan(findings, {grade: counts[grade] for grade in (*KUBE_SCORE_GRADES.values(), "SKIPPED")})


def scan(scanner: str, scanners_dir: Path, manifest: Path, render_name: str) -> Scan:
    if scanner == "checkov":
        return run_checkov(str(scanners_dir / "checkov"), manifest, render_name)
    return run_kube_score(str(scanners_dir / "kube-score"), manifest, render_name)


# ---------------------------------------------------------------------------
# docs/security-review.md
# ---------------------------------------------------------------------------

SECTION = re.compile(r"^### (checkov|kube-score): (seed|operator)\s*$")


def accepted(text: str) -> dict[tuple[str, str], dict[tuple[str, str], str]]:
    """(scanner, render) -> (check, Kind/name) -> reason, from the review's sections.

    A section is a heading `### SCANNER: RENDER` followed by a table whose rows are
    `| check | objects | reason |`; objects may list several Kind/name, comma-separated.
    A reason that starts with "to fix:" marks a finding that stays until the fix lands.
    """
    out: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    section: tuple[str, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            match = SECTION.match(line)
            section = (match.group(1), match.group(2)) if match else None
            if section:
                if section in out:
                    raise ValueError(f"line {number}: section {line!r} appears twice")
                out[section] = {}
            continue
        if section is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            raise ValueError(f"line {number}: a row needs 3 cells (check | objects | reason): {line!r}")
        check, objects, reason = (c.replace("`", "").strip() for c in cells)
        if check.lower() == "check" or set(check) <= set("-: "):
            continue  # the header row and its separator
        if not reason:
            raise ValueError(f"line {number}: {check} has no reason")
        for obj in (o.strip() for o in objects.split(",")):
            if not re.fullmatch(r"[A-Za-z]+/[a-z0-9.-]+", obj):
                raise ValueError(f"line {number}: {obj!r} is not Kind/name")
            if (check, obj) in out[section]:
                raise ValueError(f"line {number}: {check} {obj} is listed twice")
            out[section][(check, obj)] = reason
    return out


def is_to_fix(reason: str) -> bool:
    return reason.replace("*", "").strip().lower().startswith(TO_FIX)


# ---------------------------------------------------------------------------
# make scan
# ---------------------------------------------------------------------------


def _last_line(command: list[str]) -> str:
    return subprocess.run(command, check=True, text=True, capture_output=True).stdout.strip().splitlines()[-1]


def main() -> int:
    helm = os.environ.get("MYDB_HELM") or str(Path(_last_line(["bash", str(REPO / "hack/build-tools.sh")])) / "helm")
    scanners_dir = Path(_last_line(["bash", str(REPO / "hack/build-scanners.sh")]))
    listed = accepted(REVIEW.read_text())
    unlisted = 0
    with tempfile.TemporaryDirectory(prefix="mydb-scan-") as tmp:
        for render_name in RENDERS:
            manifest = Path(tmp) / f"{render_name}.yaml"
            manifest.write_text(render(render_name, helm))
            for scanner in SCANNERS:
                result = scan(scanner, scanners_dir, manifest, render_name)
                known = listed.get((scanner, render_name), {})
                counts = ", ".join(f"{k} {v}" for k, v in result.counts.items())
                print(f"\n### {scanner}: {render_name}\n\ncounts: {counts}\n")
                print("| check | object | reason |\n|---|---|---|")
                for f in sorted(result.findings, key=lambda f: (f.check, f.object)):
                    reason = known.get(f.key)
                    unlisted += reason is None
                    print(f"| `{f.check}` | `{f.object}` | {reason or 'NOT LISTED: ' + f.message} |")
                for check, obj in sorted(set(known) - {f.key for f in result.findings}):
                    print(f"| `{check}` | `{obj}` | NO LONGER FOUND (remove the row) |")
    print(f"\n{unlisted} finding(s) not listed in {REVIEW.relative_to(REPO)}")
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
