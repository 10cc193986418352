"""Fixtures: the fake API server and Helm of fake_api.py, handed to the code under test through its Runtime."""

from __future__ import annotations

import pytest
from fake_api import FakeApi, FakeHelm, make_runtime

from mydb_operator.reconcile.runtime import Runtime


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def helm() -> FakeHelm:
    return FakeHelm()


@pytest.fixture
def runtime(helm: FakeHelm, api: FakeApi) -> Runtime:
    return make_runtime(helm, api=api)
