"""Fixtures: the fake API server and Helm of fake_api.py, in place of the real calls."""

from __future__ import annotations

import pytest
from fake_api import FakeApi, FakeHelm, make_runtime

from mydb_operator.cluster import reads, writes
from mydb_operator.reconcile import observing
from mydb_operator.reconcile.runtime import Runtime


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()
    for name in ("observation", "read_secret", "storage_class", "default_storage_class", "read_statefulset",
                 "read_cronjob", "claim_exists"):
        monkeypatch.setattr(reads, name, getattr(fake, name))
    for name in ("create_secret_once", "create_job_once", "grow_claim", "orphan_statefulset", "label_pod"):
        monkeypatch.setattr(writes, name, getattr(fake, name))
    # The informers' cache is never filled here: after Helm the operator reads the API at once.
    monkeypatch.setattr(observing, "CATCH_UP_SECONDS", 0.0)
    return fake


@pytest.fixture
def helm() -> FakeHelm:
    return FakeHelm()


@pytest.fixture
def runtime(helm: FakeHelm) -> Runtime:
    return make_runtime(helm)


