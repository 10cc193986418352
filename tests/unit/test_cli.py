"""The operator's start-up tuning of glibc malloc."""

from __future__ import annotations

import pytest

from mydb_operator import cli


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_arenas_are_limited_to_two(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(cli.ctypes, "CDLL", lambda name: libc)
    cli.limit_malloc_arenas()
    assert libc.calls == [(cli.M_ARENA_MAX, 2)]


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setattr(cli.ctypes, "CDLL", lambda name: libc)
    cli.limit_malloc_arenas()
    assert libc.calls == []


def test_without_glibc_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(name)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(cli.ctypes, "CDLL", missing)
    cli.limit_malloc_arenas()  # no exception: the operator starts anyway
