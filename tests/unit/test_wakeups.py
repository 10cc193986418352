"""Wakeups: a poke reaches the daemon that registered the key last, and an older one leaving does not
take the newer one's wake-up with it (a MyDatabase deleted and made again under the same name)."""

from __future__ import annotations

from mydb_operator.handlers.wakeups import Wakeups


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
