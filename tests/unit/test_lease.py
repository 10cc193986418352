"""The primary lease as the operator reads and writes it (model/lease.py, desired/lease.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mydb_operator.desired.lease import lease_body
from mydb_operator.model.lease import LeaseFacts, held_for, lease_members, parse_lease, seen, still_for, written

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def pod(name: str, address: str | None) -> dict:
    return {"metadata": {"name": name}, "status": {"podIP": address} if address else {}}


def test_the_members_are_the_specs_ordinals_with_their_pods_addresses():
    pods = [pod("db-0", "198.18.128.5"), pod("db-2", None), pod("db-7", "198.18.128.9")]  # db-7: scaled away
    assert lease_members("db", 3, pods) == ("db-0=198.18.128.5", "db-1=", "db-2=")
    assert lease_members("db", 0, pods) == ()


def test_the_body_names_the_holder_and_members_and_reads_back_the_same():
    body = lease_body("ns", "db", "db-1", ("db-0=198.18.128.5", "db-1="), NOW, "")
    assert body["metadata"]["name"] == "db-primary" and "resourceVersion" not in body["metadata"]
    assert body["spec"]["holderIdentity"] == "db-1"
    assert body["spec"]["renewTime"] == body["spec"]["acquireTime"] == "2026-12-07T12:00:00.000000Z"
    stored = {**body, "metadata": {**body["metadata"], "resourceVersion": "4"}}
    assert parse_lease(stored) == LeaseFacts("db-1", ("db-0=198.18.128.5", "db-1="), "4")
    assert lease_body("ns", "db", "db-1", (), NOW, "4")["metadata"]["resourceVersion"] == "4"
    assert parse_lease(None) is None


def test_the_holder_is_counted_from_when_this_operator_first_saw_it_named_whatever_its_renewals():
    held = LeaseFacts("db-0", ("db-0=", "db-1="), "4")
    first = seen(None, held, NOW)
    assert held_for(first, NOW + timedelta(seconds=5)) == 5
    renewed = seen(first, LeaseFacts("db-0", ("db-0=", "db-1="), "5"), NOW + timedelta(seconds=6))
    assert renewed.facts.resource_version == "5" and held_for(renewed, NOW + timedelta(seconds=7)) == 7
    moved = seen(renewed, LeaseFacts("db-1", ("db-0=", "db-1="), "6"), NOW + timedelta(seconds=8))
    assert held_for(moved, NOW + timedelta(seconds=9)) == 1
    assert held_for(seen(None, None, NOW), NOW + timedelta(seconds=3)) == 3  # no lease: none named
    assert held_for(None, NOW) == 0  # never read: no evidence of anything


def test_the_lease_is_still_from_when_this_operator_last_saw_its_resource_version_change():
    """A holder renews every RENEW_SECONDS (a write, a new resourceVersion): a lease that stays the same is one
    nobody renews, by the operator's own clock."""
    first = seen(None, LeaseFacts("db-0", (), "4"), NOW)
    same = seen(first, LeaseFacts("db-0", (), "4"), NOW + timedelta(seconds=3))
    assert still_for(same, NOW + timedelta(seconds=5)) == 5
    assert not same.renewed  # nobody renewed it yet
    renewed = seen(same, LeaseFacts("db-0", (), "5"), NOW + timedelta(seconds=6))
    assert still_for(renewed, NOW + timedelta(seconds=7)) == 1 and renewed.renewed
    assert held_for(renewed, NOW + timedelta(seconds=7)) == 7  # the holder's moment is kept
    assert still_for(None, NOW) == 0


def test_the_operators_own_write_is_no_renewal():
    """A simulated pod renews nothing: the operator's own writes (the members' addresses) must not count."""
    mine = written(None, LeaseFacts("db-0", ("db-0=",), "4"), NOW)
    again = written(mine, LeaseFacts("db-0", ("db-0=198.18.131.10",), "5"), NOW + timedelta(seconds=2))
    assert not again.renewed and still_for(again, NOW + timedelta(seconds=3)) == 1
    assert not seen(again, LeaseFacts("db-0", again.facts.members, "5"), NOW + timedelta(seconds=9)).renewed
    renewed = seen(again, LeaseFacts("db-0", again.facts.members, "6"), NOW + timedelta(seconds=9))
    assert renewed.renewed and written(renewed, LeaseFacts("db-0", (), "7"), NOW + timedelta(seconds=10)).renewed
    moved = written(renewed, LeaseFacts("db-1", (), "8"), NOW + timedelta(seconds=11))
    assert not moved.renewed and held_for(moved, NOW + timedelta(seconds=12)) == 1
