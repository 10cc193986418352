"""External judges: checkov and kube-score on what users deploy (hack/scan.py runs them).

Two renders, each scanned by both: the seed database as `mydb-operator render -f
examples/production-db.yaml` prints it, and `helm template` of the operator chart with
its defaults in the namespace docs/install.md installs it to. Every finding that
remains is listed in docs/security-review.md, under `### SCANNER: RENDER`, with the
reason it does not apply or `to fix:` and the fix. A finding that is not listed fails
the test with the scanner's message; so does a listed one that no longer occurs, so the
list never goes stale (delete its row when the fix lands).

The scanners come from hack/build-scanners.sh (`make scanners`, which `make test`
runs). Under CI=true a missing scanner fails; elsewhere these tests are skipped with
the reason.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mydb_scan", REPO / "hack" / "scan.py")
scan = importlib.util.module_from_spec(_spec)
sys.modules["mydb_scan"] = scan  # its dataclasses look their module up there
_spec.loader.exec_module(scan)

IN_CI = os.environ.get("CI", "").lower() == "true"
PAIRS = [(scanner, render) for render in scan.RENDERS for scanner in scan.SCANNERS]
IDS = [f"{scanner}-{render}" for scanner, render in PAIRS]
REVIEW_NAME = scan.REVIEW.relative_to(REPO)


@pytest.fixture(scope="session")
def scanners_dir() -> Path:
    result = subprocess.run(["bash", str(REPO / "hack" / "build-scanners.sh"), "--check"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        why = f"checkov and kube-score are not installed (make scanners): {result.stderr.strip()}"
        if IN_CI:
            pytest.fail(f"CI=true and {why}", pytrace=False)
        pytest.skip(why)
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def review() -> dict:
    return scan.accepted(scan.REVIEW.read_text())


@pytest.fixture(scope="module")
def scanned(scanners_dir, helm_bin, tmp_path_factory):
    """(scanner, render) -> scan.Scan, each render and each scan done once."""
    folder = tmp_path_factory.mktemp("scan")
    manifests: dict[str, Path] = {}
    results: dict[tuple[str, str], scan.Scan] = {}

    def get(scanner: str, render: str) -> scan.Scan:
        if render not in manifests:
            manifests[render] = folder / f"{render}.yaml"
            manifests[render].write_text(scan.render(render, helm_bin))
        if (scanner, render) not in results:
            results[(scanner, render)] = scan.scan(scanner, scanners_dir, manifests[render], render)
        return results[(scanner, render)]

    return get


@pytest.mark.parametrize(("scanner", "render"), PAIRS, ids=IDS)
def test_every_finding_is_fixed_or_listed(scanned, review, scanner, render):
    result = scanned(scanner, render)
    listed = review.get((scanner, render), {})
    new = sorted({f for f in result.findings if f.key not in listed}, key=lambda f: f.key)
    counts = ", ".join(f"{key} {value}" for key, value in result.counts.items())
    if new:
        rows = "\n".join(f"  | `{f.check}` | `{f.object}` | {f.message} |" for f in new)
        pytest.fail(f"{scanner} on the {render} render found {len(new)} finding(s) that {REVIEW_NAME} does not "
                    f"list (counts: {counts}):\n{rows}\nFix each, or add its row under `### {scanner}: {render}` "
                    "with the reason it does not apply (`make scan` prints every finding as a row).",
                    pytrace=False)


@pytest.mark.parametrize(("scanner", "render"), PAIRS, ids=IDS)
def test_every_listed_finding_still_occurs(scanned, review, scanner, render):
    result = scanned(scanner, render)
    found = {f.key for f in result.findings}
    stale = sorted(set(review.get((scanner, render), {})) - found)
    if stale:
        rows = "\n".join(f"  {check} {obj}" for check, obj in stale)
        pytest.fail(f"{REVIEW_NAME} lists finding(s) that {scanner} no longer reports on the {render} render "
                    f"(fixed? delete their rows):\n{rows}", pytrace=False)


# --------------------------------------------------------------------------
# the review's format and the mapping of findings to objects (no scanner needed)
# --------------------------------------------------------------------------


def test_the_review_has_one_section_per_scanner_and_render(review):
    assert sorted(review) == sorted(PAIRS)


REVIEW_SAMPLE = """
# Title

Prose with a | pipe | table | that is not in a section.

### checkov: seed

| check | objects | reason |
|---|---|---|
| `CKV_K8S_21` | `ConfigMap/a`, `Service/b` | rendered without -n |
| CKV_K8S_10 | StatefulSet/a | **to fix:** default requests |

### kube-score: operator

| check | objects | reason |
|-------|---------|--------|
| pod-networkpolicy | Deployment/op | to fix: a NetworkPolicy |

## Counts

| render | passed | failed |
|---|---|---|
| seed | 1 | 2 |
"""


def test_review_rows_list_objects_and_reasons():
    parsed = scan.accepted(REVIEW_SAMPLE)
    assert parsed == {
        ("checkov", "seed"): {
            ("CKV_K8S_21", "ConfigMap/a"): "rendered without -n",
            ("CKV_K8S_21", "Service/b"): "rendered without -n",
            ("CKV_K8S_10", "StatefulSet/a"): "**to fix:** default requests",
        },
        ("kube-score", "operator"): {("pod-networkpolicy", "Deployment/op"): "to fix: a NetworkPolicy"},
    }
    assert scan.is_to_fix("**to fix:** default requests") and scan.is_to_fix("To fix: x")
    assert not scan.is_to_fix("rendered without -n")


@pytest.mark.parametrize(("row", "error"), [
    ("| CKV_K8S_21 | ConfigMap/a |  |", "has no reason"),
    ("| CKV_K8S_21 | ConfigMap/a | why | extra |", "3 cells"),
    ("| CKV_K8S_21 | production-db | why |", "is not Kind/name"),
    ("| CKV_K8S_21 | ConfigMap/a | why |\n| CKV_K8S_21 | ConfigMap/a | again |", "listed twice"),
])
def test_a_malformed_review_row_is_refused(row, error):
    with pytest.raises(ValueError, match=error):
        scan.accepted(f"### checkov: seed\n\n| check | objects | reason |\n|---|---|---|\n{row}\n")


def test_findings_are_named_by_the_document_their_lines_fall_in():
    text = "---\n# Source: a\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: StatefulSet\nmetadata:\n  name: b\n"
    assert scan.documents_by_line(text) == [(2, "ConfigMap/a"), (7, "StatefulSet/b")]
