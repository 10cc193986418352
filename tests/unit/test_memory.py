"""The operator's start-up tuning of glibc malloc."""

from __future__ import annotations

import pytest

from mydb_operator import memory


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_two_arenas_and_a_fixed_mmap_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: libc)
    memory.tune_malloc()
    assert libc.calls == [(memory.M_ARENA_MAX, 2), (memory.M_MMAP_THRESHOLD, 128 * 1024)]


def test_the_environment_wins_for_its_own_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: libc)
    memory.tune_malloc()
    assert libc.calls == [(memory.M_MMAP_THRESHOLD, 128 * 1024)]


def test_without_glibc_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(name)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(memory.ctypes, "CDLL", missing)
    memory.tune_malloc()  # no exception: the operator starts anyway
