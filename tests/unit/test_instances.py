"""model/instances.py and status/primary.py: connection strings, WAL positions, and what status says of them."""

from __future__ import annotations

import pytest

from mydb_operator.model.instances import InstanceFacts, Unreachable, lsn_text, parse_conninfo, parse_lsn, with_value
from mydb_operator.model.versions import server_version
from mydb_operator.model.record import FAILOVER, SWITCHOVER, PrimaryRecord, parse_record
from mydb_operator.status.primary import PrimaryView, instances, last_moves, primary_status, routing_gap
from mydb_operator.status.warnings import checksum_warnings

ENTRYPOINT_CONNINFO = ("host=db-0.db-headless.ns.svc port=5432 user=replicator passfile=/var/run/postgresql/.pgpass "
                       "application_name=db-1 tcp_user_timeout=10000 keepalives_idle=10")


def test_a_replicas_conninfo_gets_another_host_and_keeps_the_rest_in_order():
    moved = with_value(ENTRYPOINT_CONNINFO, "host", "db-2.db-headless.ns.svc")
    assert moved == ENTRYPOINT_CONNINFO.replace("db-0.", "db-2.")
    assert InstanceFacts("db-1", True, 1, 0, conninfo=moved).upstream == "db-2.db-headless.ns.svc"


def test_conninfo_quotes_and_escapes_read_and_write_back():
    parsed = parse_conninfo("host = 'a b' password='it\\'s' port=5432 app=x\\ y")
    assert parsed == [("host", "a b"), ("password", "it's"), ("port", "5432"), ("app", "x y")]
    assert parse_conninfo(with_value("password='it\\'s'", "host", "h h")) == [("password", "it's"), ("host", "h h")]
    with pytest.raises(ValueError):
        parse_conninfo("host")
    assert InstanceFacts("db-1", True, 1, 0, conninfo="host='unterminated").upstream is None


@pytest.mark.parametrize("text, value", [("0/0", 0), ("0/3000060", 0x3000060), ("1A/FF", (0x1A << 32) + 0xFF)])
def test_wal_positions_read_and_print_as_postgresql_does(text, value):
    assert parse_lsn(text) == value and lsn_text(value) == text


def test_not_a_wal_position():
    assert parse_lsn(None) is None and parse_lsn("12") is None and parse_lsn("x/1") is None


def test_the_record_reads_back_what_it_wrote():
    record = PrimaryRecord("db-1", "db-0", FAILOVER, "2026-01-01T00:00:00Z")
    configmap = {"metadata": {"resourceVersion": "9"}, "data": record.data()}
    assert parse_record(configmap) == PrimaryRecord("db-1", "db-0", FAILOVER, "2026-01-01T00:00:00Z", "", "9")
    assert parse_record({"data": {"primary": " "}}) is None and parse_record(None) is None


def pod(name, ready=True, role="replica"):
    return {"metadata": {"name": name, "labels": {"myapp.example.com/role": role}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_instances_say_what_each_server_answered_and_the_replay_lag():
    view = PrimaryView(probes={
        "db-0": InstanceFacts("db-0", False, 2, 5000),
        "db-1": InstanceFacts("db-1", True, 2, 4900, replay_lsn=4000, receiver="streaming"),
        "db-2": Unreachable("db-2", "no answer in time"),
    })
    found = instances("db", view, [pod("db-2", ready=False), pod("db-0", role="primary"), pod("db-1")])
    assert found == [
        {"name": "db-0", "ready": True, "role": "primary", "timeline": 2, "lsn": "0/1388"},
        {"name": "db-1", "ready": True, "role": "replica", "timeline": 2, "lsn": "0/1324", "state": "streaming",
         "lagBytes": 1000},
        {"name": "db-2", "ready": False, "role": "replica", "state": "no answer: no answer in time"},
    ]
    assert instances("db", PrimaryView(probes={"db-0": Unreachable("db-0", "x")}), [pod("db-0")]) == []


def test_a_server_that_stops_answering_keeps_its_last_known_position():
    """A failover measures the replicas' lag against the primary's last known WAL position: once the primary
    hangs, the status it writes must not forget it."""
    view = PrimaryView(probes={"db-1": InstanceFacts("db-1", True, 1, 4000, receiver="streaming")})
    before = [{"name": "db-0", "role": "primary", "timeline": 1, "lsn": "0/2710"}]
    [hung, _] = instances("db", view, [pod("db-0", ready=False, role="primary"), pod("db-1")], before)
    assert hung == {"name": "db-0", "ready": False, "role": "primary", "state": "not answering", "timeline": 1,
                    "lsn": "0/2710"}


def test_status_primary_is_the_last_pod_confirmed_serving_as_primary():
    serving = PrimaryView(probes={"db-0": InstanceFacts("db-0", False, 1, 10)})
    assert primary_status("db", serving, [pod("db-0", role="primary")], {})["primary"] == "db-0"
    pending = PrimaryView(record=PrimaryRecord("db-1", "db-0", FAILOVER, "t"),
                          probes={"db-1": InstanceFacts("db-1", True, 1, 10)})
    during = primary_status("db", pending, [pod("db-0", ready=False), pod("db-1")], {"primary": "db-0"})
    assert (during["primary"], during["targetPrimary"]) == ("db-0", "db-1")  # not promoted yet
    assert "primary" not in primary_status("db", PrimaryView(), [], {"primary": "db-0"})


def test_status_names_the_node_of_the_primary_and_of_each_instance():
    """kubectl get mydb -o wide shows the primary's node: a failover's from and to are on different machines."""
    placed = [{**pod("db-0", role="primary"), "spec": {"nodeName": "node-a"}}, {**pod("db-1"), "spec": {"nodeName": "node-b"}}]
    view = PrimaryView(probes={"db-0": InstanceFacts("db-0", False, 1, 10), "db-1": InstanceFacts("db-1", True, 1, 10)})
    fields = primary_status("db", view, placed, {})
    assert fields["primaryNode"] == "node-a"
    assert [(entry["name"], entry["node"]) for entry in fields["instances"]] == [("db-0", "node-a"), ("db-1", "node-b")]
    # A pod not scheduled yet (no node): the last known node stays until it has one.
    unplaced = [pod("db-0", role="primary"), pod("db-1")]
    assert primary_status("db", view, unplaced, {"primary": "db-0", "primaryNode": "node-a"})["primaryNode"] == "node-a"
    assert "primaryNode" not in primary_status("db", view, unplaced, {})


def test_last_moves_keep_the_other_kind():
    previous = {"lastSwitchover": {"from": "db-0", "to": "db-1", "decidedAt": "a"}}
    record = PrimaryRecord("db-2", "db-1", FAILOVER, "b", "c")
    assert last_moves(record, previous) == {**previous,
                                           "lastFailover": {"from": "db-1", "to": "db-2", "decidedAt": "b",
                                                            "promotedAt": "c"}}
    assert "lastSwitchover" in last_moves(PrimaryRecord("db-0", "db-2", SWITCHOVER, "d"), {})


def test_ready_waits_for_the_services_to_route_to_the_right_pods():
    pods = [pod("db-0", role="primary"), pod("db-1"), pod("db-2", ready=False), pod("db-3", role="fenced")]
    assert routing_gap("db", "db-0", pods, {"db": ("db-0",), "db-ro": ("db-1",)}) is None
    assert "db to route to db-0" in routing_gap("db", "db-0", pods, {"db": ("db-0", "db-3"), "db-ro": ("db-1",)})
    assert "db-ro to route to db-1" in routing_gap("db", "db-0", pods, {"db": ("db-0",), "db-ro": ()})


def test_a_server_that_goes_away_mid_statement_is_unreachable_not_a_crash(monkeypatch):
    """Found in the e2e logs: a pod deleted while the probe prepared its query made asyncpg raise its
    InternalClientError, which escaped the pass as a traceback."""
    import asyncio
    from contextlib import asynccontextmanager

    import asyncpg

    from mydb_operator.instances import probe as probing
    from mydb_operator.instances.connection import Login, Server

    class Halfway:
        async def fetchrow(self, *_):
            raise asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress")

    @asynccontextmanager
    async def session(*_, **__):
        yield Halfway()

    monkeypatch.setattr(probing, "session", session)
    answer = asyncio.run(probing.probe(Server("db-0", "10.0.0.1", 5432), Login("postgres", "pw")))
    assert answer == Unreachable("db-0", "cannot switch to state 11; another operation (2) is in progress")


def test_status_says_which_version_each_server_runs_and_keeps_the_primarys_while_it_is_silent():
    """The image's tag is what was deployed; status.version is what the primary's server says it runs (the 15.2
    and 15.3 stand-ins here both hold Debian's 15.x)."""
    view = PrimaryView(probes={"db-0": InstanceFacts("db-0", False, 1, 10, version="15.14"),
                               "db-1": InstanceFacts("db-1", True, 1, 10, version="15.13")})
    fields = primary_status("db", view, [pod("db-0", role="primary"), pod("db-1")], {})
    assert fields["version"] == "15.14"
    assert [entry["version"] for entry in fields["instances"]] == ["15.14", "15.13"]
    silent = PrimaryView(probes={"db-0": Unreachable("db-0", "x")})
    assert primary_status("db", silent, [pod("db-0", role="primary")], fields)["version"] == "15.14"


def test_status_says_which_servers_carry_data_checksums():
    view = PrimaryView(probes={"db-0": InstanceFacts("db-0", False, 1, 10, data_checksums=True),
                               "db-1": InstanceFacts("db-1", True, 1, 10, data_checksums=False),
                               "db-2": InstanceFacts("db-2", True, 1, 10)})
    fields = primary_status("db", view, [pod("db-0", role="primary"), pod("db-1"), pod("db-2")], {})
    assert [entry.get("dataChecksums") for entry in fields["instances"]] == [True, False, None]


def test_pages_that_failed_their_checksum_show_per_server_and_each_rise_is_one_warning():
    view = PrimaryView(probes={"db-0": InstanceFacts("db-0", False, 1, 10, checksum_failures=2),
                               "db-1": InstanceFacts("db-1", True, 1, 10)})
    pods = [pod("db-0", role="primary"), pod("db-1")]
    fields = primary_status("db", view, pods, {})
    assert [entry.get("checksumFailures") for entry in fields["instances"]] == [2, None]
    [warning] = checksum_warnings({}, fields)
    assert warning[:2] == ("Warning", "DataChecksumFailures") and warning[2].startswith("db-0 read 2 data pages")
    assert checksum_warnings(fields, fields) == []  # told once per rise
    silent = primary_status("db", PrimaryView(probes={"db-0": Unreachable("db-0", "x"),
                                                      "db-1": InstanceFacts("db-1", True, 1, 10)}), pods, fields)
    assert silent["instances"][0]["checksumFailures"] == 2  # kept while the server does not answer


@pytest.mark.parametrize("number, version", [(150014, "15.14"), (170002, "17.2"), (130000, "13.0")])
def test_a_server_version_number_reads_as_major_dot_minor(number, version):
    assert server_version(number) == version


def test_kept_data_is_reported_per_instance_and_warned_of_once():
    """A pod that kept its data aside (entrypoint.sh) has it in status.instances[].keptData, kept while the pod
    does not answer; a Warning names it once, with the WAL range it holds."""
    from mydb_operator.model.instances import KeptData, kept_facts
    from mydb_operator.status.warnings import kept_data_warnings

    text = "reason=rewind-failed\nkeptAt=2026-12-07T12:00:00Z\ntimeline=5\ncheckpoint=0/89000028\ndivergedAt=0/483EFF60\n" \
           "walEnd=000000050000000000000089\nbytes=1048576\nmajor=15\npod=db-0\nempty=\n"
    assert kept_facts(text)["divergedAt"] == "0/483EFF60" and "empty" not in kept_facts(text)
    facts = InstanceFacts("db-0", True, 6, 4900, kept=(KeptData("diverged-20261207T120000Z", kept_facts(text)),))
    primary = InstanceFacts("db-1", False, 6, 5000)
    view = PrimaryView(probes={"db-0": facts, "db-1": primary})
    entries = instances("db", view, [pod("db-0"), pod("db-1", role="primary")])
    assert entries[0]["keptData"] == [{"directory": "diverged-20261207T120000Z", "reason": "rewind-failed",
                                       "keptAt": "2026-12-07T12:00:00Z", "timeline": "5", "divergedAt": "0/483EFF60",
                                       "checkpoint": "0/89000028", "walEnd": "000000050000000000000089", "major": "15",
                                       "bytes": 1048576}]
    silent = instances("db", PrimaryView(probes={"db-1": primary}), [pod("db-0"), pod("db-1", role="primary")], entries)
    assert silent[0]["keptData"] == entries[0]["keptData"]
    told = kept_data_warnings({}, {"instances": entries})
    assert len(told) == 1 and told[0][1] == "DivergedDataKept"
    assert "db-0 kept data" in told[0][2] and "diverged at 0/483EFF60" in told[0][2] and "0/89000028" in told[0][2]
    assert kept_data_warnings({"instances": entries}, {"instances": silent}) == []
