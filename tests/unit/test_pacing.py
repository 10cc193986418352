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
