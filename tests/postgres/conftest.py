"""Fixtures: the rendered chart, the machine's PostgreSQL, and pods started from them.

The servers are session-wide (one primary, one replica) and stopped with
`pg_ctl stop -m immediate` by their finalizers, whatever the tests did.
Without PostgreSQL the tests fail under CI=true and are skipped elsewhere.
"""

from __future__ import annotations

import copy
import os
import secrets
import shutil
from pathlib import Path
from typing import Callable

import pytest
import yaml

from .harness import EXAMPLE, BackupJob, DatabasePod, Machine, Rendered, find_helm, find_machine, render

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def render_database(tmp_path_factory) -> Callable[..., Rendered]:
    """render_database(retention=None): `mydb-operator render` of examples/production-db.yaml,
    with spec.backup.retention replaced when given (cached per retention)."""
    helm = find_helm()
    if helm is None:
        pytest.fail("helm not found: set MYDB_HELM or run hack/build-tools.sh", pytrace=False)
    workdir = tmp_path_factory.mktemp("render")
    cache: dict[str | None, Rendered] = {}

    def do(retention: str | None = None) -> Rendered:
        if retention not in cache:
            database = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
            if retention is not None:
                database["spec"]["backup"]["retention"] = retention
            cache[retention] = render(helm, database, workdir)
        return cache[retention]

    return do


@pytest.fixture(scope="session")
def rendered(render_database) -> Rendered:
    return render_database()


@pytest.fixture(scope="session")
def machine(rendered: Rendered) -> Machine:
    """The PostgreSQL major of the rendered image tag, installed on this machine."""
    image = rendered.statefulset()["spec"]["template"]["spec"]["containers"][0]["image"]
    major = image.rsplit(":", 1)[1].split(".")[0]
    found, why = find_machine(major)
    if found is None:
        if IN_CI:
            pytest.fail(f"CI=true and {why}", pytrace=False)
        pytest.skip(why)
    yield found
    shutil.rmtree(found.root, ignore_errors=True)


def _pod(request, machine: Machine, rendered: Rendered, ordinal: int) -> DatabasePod:
    pod = DatabasePod(machine, rendered, ordinal)
    request.addfinalizer(pod.stop)    # also when start() fails half-way
    return pod.start()


@pytest.fixture(scope="session")
def primary(request, machine, rendered) -> DatabasePod:
    """Ordinal 0 of the StatefulSet, started by entrypoint.sh: initdb and serve."""
    return _pod(request, machine, rendered, 0)


@pytest.fixture(scope="session")
def replica(request, machine, rendered, primary) -> DatabasePod:
    """Ordinal 1, started by entrypoint.sh: a pg_basebackup clone of the primary."""
    return _pod(request, machine, rendered, 1)


@pytest.fixture
def backup_job(machine, rendered, primary) -> Callable[..., BackupJob]:
    """backup_job(rendered=None, backups=None): the backup CronJob's container, aimed at
    the primary, writing to a fresh backup volume (or to `backups`)."""

    def make(other: Rendered | None = None, backups: Path | None = None) -> BackupJob:
        backups = backups or machine.mkdir(machine.root / f"backups-{secrets.token_hex(4)}")
        return BackupJob(machine, other or rendered, backups)

    return make
