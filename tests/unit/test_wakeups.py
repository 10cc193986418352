"""Wakeups: a poke reaches the daemon that registered the key last, and an older one leaving does not
take the newer one's wake-up with it (a MyDatabase deleted and made again under the same name); which
changes to a MyDatabase poke it at once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from mydb_operator import names
from mydb_operator.handlers.wakeups import Wakeups, mydatabase_changed


def test_a_poke_wakes_the_registered_daemon_only() -> None:
    wakeups = Wakeups()
    wake = wakeups.register(("ns", "db"))
    other = wakeups.register(("ns", "other"))
    wakeups.poke("ns", "db")
    wakeups.poke("ns", "gone")
    assert wake.is_set() and not other.is_set()


def test_an_older_daemon_leaving_keeps_the_newer_ones_wake_up() -> None:
    wakeups = Wakeups()
    older = wakeups.register(("ns", "db"))
    newer = wakeups.register(("ns", "db"))
    assert newer is not older
    assert wakeups.unregister(("ns", "db"), older) is False
    wakeups.poke("ns", "db")
    assert newer.is_set() and not older.is_set()
    assert wakeups.unregister(("ns", "db"), newer) is True
    wakeups.poke("ns", "db")  # nobody left: nothing to wake, no error


def test_waiting_for_a_daemon_to_leave_ends_when_it_unregisters() -> None:
    async def scenario() -> list[str]:
        wakeups, seen = Wakeups(), []
        await wakeups.wait_gone(("ns", "none"))  # no daemon: at once
        older = wakeups.register(("ns", "db"))
        newer = wakeups.register(("ns", "db"))
        waiting = asyncio.create_task(wakeups.wait_gone(("ns", "db")))
        await asyncio.sleep(0.05)
        wakeups.unregister(("ns", "db"), older)  # not the daemon that holds the key
        await asyncio.sleep(0.05)
        seen.append("waiting" if not waiting.done() else "released early")
        wakeups.unregister(("ns", "db"), newer)
        await asyncio.wait_for(waiting, 1)
        seen.append("released")
        return seen

    assert asyncio.run(scenario()) == ["waiting", "released"]


def test_a_spec_edit_a_backup_request_or_a_switchover_request_wakes_the_database_at_once() -> None:
    """Only these: any other change to the MyDatabase (its status written by the operator) waits for the
    daemon's own schedule."""
    wakeups = Wakeups()
    wake = wakeups.register(("ns", "db"))
    memo = SimpleNamespace(wakeups=wakeups)
    settled = {"observedGeneration": 3, "backup": {"lastOnDemandRequest": "t1"}}

    def woken(meta: dict, status: dict) -> bool:
        wake.clear()
        mydatabase_changed(meta={"namespace": "ns", "name": "db", **meta}, status=status, memo=memo)
        return wake.is_set()

    assert not woken({"generation": 3}, settled)
    assert woken({"generation": 4}, settled)
    assert woken({"generation": 3, "annotations": {names.BACKUP_NOW_ANNOTATION: "t2"}}, settled)
    assert not woken({"generation": 3, "annotations": {names.BACKUP_NOW_ANNOTATION: "t1"}}, settled)
    assert woken({"generation": 3, "annotations": {names.SWITCHOVER_ANNOTATION: "db-1"}}, settled)


def test_between_passes_the_primary_alone_is_asked_for_its_position_and_a_silent_one_ends_the_sleep(monkeypatch):
    """A database whose replicas stream asynchronously: between whole passes (every resync), its primary alone is
    asked every SIGHTING_INTERVAL_SECONDS (one session: the lag limit's reference stays fresh at a sixth of a
    pass's cost); when it does not answer as the primary the sleep ends at once and a whole pass looks. Without
    that need, or when poked, nothing is asked."""
    import asyncio
    from types import SimpleNamespace

    from mydb_operator.handlers import daemon

    class Stopped:
        def __bool__(self) -> bool:
            return False

        async def wait(self) -> None:
            await asyncio.sleep(3600)

    asked: list[str] = []
    answers = [True, True, False]  # then True

    async def read_position(namespace, name, spec, runtime):
        asked.append(name)
        return answers.pop(0) if answers else True

    monkeypatch.setattr(daemon, "read_position", read_position)
    monkeypatch.setattr(daemon, "SIGHTING_INTERVAL_SECONDS", 0.05)
    body = SimpleNamespace(spec={"replicas": 3, "version": "15.2", "storage": "1Gi"})
    memo = SimpleNamespace(runtime=None)

    async def idle(delay: float, reads: bool, wake: asyncio.Event) -> bool:
        return await daemon.idle_until_poked(("ns", "db"), body, wake, Stopped(), delay, reads, memo)

    assert asyncio.run(idle(10.0, True, asyncio.Event())) is False and len(asked) == 3  # the third: no primary
    asked.clear()
    assert asyncio.run(idle(0.12, True, asyncio.Event())) is False and 1 <= len(asked) <= 3  # until the pass is due
    asked.clear()
    assert asyncio.run(idle(0.1, False, asyncio.Event())) is False and asked == []

    async def poked() -> bool:
        wake = asyncio.Event()
        asyncio.get_running_loop().call_later(0.02, wake.set)
        return await idle(10.0, True, wake)
    assert asyncio.run(poked()) is True and asked == []
