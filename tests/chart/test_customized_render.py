"""`mydb-operator render` with a platform config: the same overlays and object patches the operator applies,
and the start-up check that refuses a chart the operator cannot drive. No cluster needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pathlib import Path

import yaml
from manifests import documents

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mydatabase"
# A hang guard, not a time limit: under make test these tests run on the CPU the e2e pass leaves
# (hack/background.py), and a render may wait minutes for it.
HANG_SECONDS = 900

SEED = REPO / "examples" / "production-db.yaml"
PLATFORM = {
    "values": {"image": {"registry": "mirror.example.com"}, "nodeSelector": {"pool": "databases"}},
    "objectPatches": [
        {"target": {"kind": "StatefulSet", "name": "*"},
         "patch": [{"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "databases"}]},
        {"target": {"kind": "Service", "name": "*-ro"},
         "patch": [{"op": "add", "path": "/metadata/annotations", "value": {"lb": "internal"}}]},
    ],
}


def cli(helm_bin, *args, platform=None, tmp_path=None, env=None):
    command = [sys.executable, "-m", "mydb_operator.cli", "--helm", helm_bin]
    if platform is not None:
        path = tmp_path / "platform.yaml"
        path.write_text(yaml.safe_dump(platform))
        command += ["--platform-config", str(path)]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=REPO, timeout=HANG_SECONDS,
                          env={**os.environ, **(env or {})})


def by_kind_name(text):
    return {(d["kind"], d["metadata"]["name"]): d for d in documents(text)}


def test_render_applies_platform_values_and_object_patches(helm_bin, tmp_path):
    """Defaults reach the pods; object patches reach exactly the objects they target."""
    result = cli(helm_bin, "render", "-f", str(SEED), platform=PLATFORM, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    objects = by_kind_name(result.stdout)
    pod = objects[("StatefulSet", "production-db")]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "databases"
    assert pod["nodeSelector"] == {"pool": "databases"}
    assert pod["containers"][0]["image"] == "mirror.example.com/library/postgres:15.2"
    assert objects[("Service", "production-db-ro")]["metadata"]["annotations"] == {"lb": "internal"}
    assert "annotations" not in objects[("Service", "production-db")]["metadata"]


def test_a_patch_that_does_not_apply_fails_the_render_whole(helm_bin, tmp_path):
    """A bad object patch stops Helm: nothing half-patched comes out, and the message names the patch."""
    bad = {"objectPatches": [{"target": {"kind": "CronJob"},
                              "patch": [{"op": "replace", "path": "/spec/nowhere/x", "value": 1}]}]}
    result = cli(helm_bin, "render", "-f", str(SEED), platform=bad, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "objectPatches[0] does not apply to CronJob production-db-backup" in result.stderr
    assert result.stdout == ""


def test_the_post_renderers_plugin_folder_is_removed_afterwards(helm_bin, tmp_path):
    """render and a refused run each make a temporary Helm plugins folder for the object patches, and
    remove it before they exit, whether they succeed or not."""
    temp = tmp_path / "temp"
    temp.mkdir()
    bad = {"objectPatches": [{"target": {"kind": "CronJob"},
                              "patch": [{"op": "replace", "path": "/spec/nowhere/x", "value": 1}]}]}
    custom = tmp_path / "chart"
    shutil.copytree(CHART, custom)
    (custom / "templates" / "statefulset.yaml").write_text("")  # no StatefulSet: the start-up check refuses it
    runs = [
        cli(helm_bin, "render", "-f", str(SEED), platform=PLATFORM, tmp_path=tmp_path, env={"TMPDIR": str(temp)}),
        cli(helm_bin, "render", "-f", str(SEED), platform=bad, tmp_path=tmp_path, env={"TMPDIR": str(temp)}),
        cli(helm_bin, "--chart", str(custom), "run", platform=PLATFORM, tmp_path=tmp_path,
            env={"TMPDIR": str(temp)}),
    ]
    assert [result.returncode != 0 for result in runs] == [False, True, True], [r.stderr for r in runs]
    assert "does not fit the operator" in runs[2].stderr
    assert list(temp.iterdir()) == []


def test_an_invalid_platform_config_is_refused_plainly(helm_bin, tmp_path):
    result = cli(helm_bin, "values", "-f", str(SEED), platform={"valuePatches": [{"op": "nope", "path": "/a"}]},
                 tmp_path=tmp_path)
    assert result.returncode != 0
    assert "platform config: valuePatches: Unknown operation 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


def test_values_piped_into_helm_template_equal_render(helm_bin, tmp_path):
    """Without object patches, `values | helm template -f - --no-hooks` renders the same objects as `render`
    (which leaves the `helm test` hook out, as `helm upgrade` does)."""
    platform = {"values": PLATFORM["values"]}
    values = cli(helm_bin, "values", "-f", str(SEED), platform=platform, tmp_path=tmp_path)
    assert values.returncode == 0, values.stderr
    plain = subprocess.run([helm_bin, "template", "production-db", str(CHART), "--namespace", "default", "-f", "-",
                            "--no-hooks"],
                           input=values.stdout, capture_output=True, text=True, check=True).stdout
    rendered = cli(helm_bin, "render", "-f", str(SEED), platform=platform, tmp_path=tmp_path).stdout
    assert by_kind_name(plain) == by_kind_name(rendered)


def test_run_refuses_a_chart_it_cannot_drive(helm_bin, tmp_path):
    """A custom chart whose StatefulSet selects on other labels is refused at start-up, before kopf runs."""
    custom = tmp_path / "chart"
    shutil.copytree(CHART, custom)
    sts = custom / "templates" / "statefulset.yaml"
    sts.write_text(sts.read_text().replace(
        "  selector:\n    matchLabels:\n", "  selector:\n    matchLabels:\n      tier: database\n", 1))
    result = subprocess.run([sys.executable, "-m", "mydb_operator.cli", "--helm", helm_bin, "--chart", str(custom),
                             "run"], capture_output=True, text=True, cwd=REPO, timeout=HANG_SECONDS)
    assert result.returncode != 0
    assert "does not fit the operator" in result.stderr
    assert "version 13.x: the StatefulSet must select on exactly" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_that_is_not_a_usable_mydatabase_is_refused_plainly(helm_bin, tmp_path):
    """`values -f` and `render -f` read files no API server checked: each fault is one line naming it."""
    cases = {
        "missing.yaml": None,
        "list.yaml": "- a\n- b\n",
        "broken.yaml": "kind: [\n",
        "nameless.yaml": "kind: MyDatabase\nspec: {replicas: 1, version: '15.2', storage: 1Gi}\n",
        "typo.yaml": "kind: MyDatabase\nmetadata: {name: x}\nspec: {replicas: three, version: '15.2', storage: 1Gi}\n",
    }
    expected = {
        "missing.yaml": "No such file or directory",
        "list.yaml": "expected exactly one MyDatabase, found 0",
        "broken.yaml": "not YAML: line 2, column 1: expected the node content",
        "nameless.yaml": "the MyDatabase has no metadata.name",
        "typo.yaml": "invalid MyDatabase: spec.replicas: must be an integer, got 'three'",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        for command in ("values", "render"):
            result = cli(helm_bin, command, "-f", str(tmp_path / name))
            assert result.returncode != 0, (command, name)
            assert expected[name] in result.stderr, (command, name, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, (command, name, result.stderr)
