"""The rollout window: places for new databases between their install and their pods ready."""

from __future__ import annotations

import asyncio

from mydb_operator.reconcile.pacing import RolloutWindow


def test_a_full_window_makes_the_next_database_wait_until_one_leaves() -> None:
    async def scenario() -> list[str]:
        window = RolloutWindow(2)
        order: list[str] = []
        await window.enter(("ns", "a"))
        await window.enter(("ns", "b"))
        waiting = asyncio.create_task(window.enter(("ns", "c")))
        await asyncio.sleep(0.05)
        order.append(f"c waits: {not waiting.done()}")
        window.leave(("ns", "a"))
        await asyncio.wait_for(waiting, 1)
        order.append(f"c entered, holders {window.holders()}")
        return order

    assert asyncio.run(scenario()) == ["c waits: True", "c entered, holders 2"]


def test_a_holder_enters_once_and_leaving_twice_frees_one_place() -> None:
    async def scenario() -> int:
        window = RolloutWindow(2)
        await window.enter(("ns", "a"))
        await window.enter(("ns", "a"))  # a reconcile again before its pods are ready
        window.leave(("ns", "a"))
        window.leave(("ns", "a"))
        window.leave(("ns", "never-entered"))
        return window.holders()

    assert asyncio.run(scenario()) == 0


def test_a_database_that_never_gets_ready_leaves_after_the_hold() -> None:
    async def scenario() -> bool:
        window = RolloutWindow(1, hold_seconds=0.3)
        await window.enter(("ns", "broken"))
        waiting = asyncio.create_task(window.enter(("ns", "next")))
        await asyncio.sleep(0.1)
        still_waiting = not waiting.done()
        await asyncio.wait_for(waiting, 2)  # the broken one's time runs out
        return still_waiting and window.holders() == 1

    assert asyncio.run(scenario())


def test_size_zero_never_waits() -> None:
    async def scenario() -> int:
        window = RolloutWindow(0)
        for index in range(100):
            await window.enter(("ns", f"db-{index}"))
        return window.holders()

    assert asyncio.run(scenario()) == 0


def test_places_go_first_come_first_served_and_a_freed_place_wakes_one_waiter() -> None:
    async def scenario() -> list[str]:
        window = RolloutWindow(1)
        await window.enter(("ns", "a"))
        waiters = {name: asyncio.create_task(window.enter(("ns", name))) for name in ("b", "c", "d")}
        await asyncio.sleep(0.01)
        waiters["c"].cancel()  # its database was deleted while it waited
        window.leave(("ns", "a"))
        await asyncio.sleep(0.01)
        admitted = [name for name, task in waiters.items() if task.done() and not task.cancelled()]
        window.leave(("ns", "b"))
        await asyncio.wait_for(waiters["d"], 1)
        return [*admitted, "d", f"holders {window.holders()}"]

    assert asyncio.run(scenario()) == ["b", "d", "holders 1"]


def test_each_holder_leaves_when_its_own_time_runs_out() -> None:
    async def scenario() -> float:
        window = RolloutWindow(2, hold_seconds=1.0)
        started = asyncio.get_running_loop().time()
        await window.enter(("ns", "a"))  # runs out at 1.0
        await asyncio.sleep(0.5)
        await window.enter(("ns", "b"))  # runs out at 1.5
        c = asyncio.create_task(window.enter(("ns", "c")))  # a's place at 1.0, runs out at 2.0
        d = asyncio.create_task(window.enter(("ns", "d")))  # b's place at 1.5, not c's at 2.0
        await asyncio.wait_for(c, 3)
        await asyncio.wait_for(d, 3)
        return asyncio.get_running_loop().time() - started

    assert 1.4 < asyncio.run(scenario()) < 1.9
