"""What each server says of itself, in one query per server, all asked at once."""

from __future__ import annotations

import asyncio
import json

from .. import names
from ..model.instances import InstanceFacts, KeptData, Probe, Standby, Unreachable, kept_facts, parse_history
from ..model.versions import server_version
from .connection import CONNECT_SECONDS, FAILURES, Login, Server, failure_text, session

# pg_lsn values go out as byte offsets (pg_wal_lsn_diff from 0/0): plain numbers to compare. The data kept aside
# beside PGDATA (entrypoint.sh: diverged-*) is listed from the data directory's parent, the pod's volume.
# A standby's timeline is its WAL receiver's; with none (its primary just went), the newest timeline it has the
# history of: a standby that followed a promotion fetched that history first, while its last checkpoint's
# timeline stays the old one until its next restartpoint (minutes), and a second failover in between would take
# every replica for one left behind on the old timeline.
FACTS = """
select pg_is_in_recovery() as in_recovery,
  case when pg_is_in_recovery()
    then coalesce((select received_tli from pg_stat_wal_receiver),
                  greatest((select timeline_id from pg_control_checkpoint()),
                           (select max(('x' || substr(name, 1, 8))::bit(32)::int) from pg_ls_waldir()
                            where name ~ '^[0-9A-F]{8}[.]history$')))
    else ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
  end as timeline,
  pg_wal_lsn_diff(case when pg_is_in_recovery()
    then coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())
    else pg_current_wal_lsn() end, '0/0')::bigint as wal_lsn,
  pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint as replay_lsn,
  (select status from pg_stat_wal_receiver) as receiver,
  current_setting('primary_conninfo') as conninfo,
  (select coalesce(json_agg(json_build_object(
      'name', application_name, 'state', state, 'sync_state', sync_state,
      'flush', pg_wal_lsn_diff(flush_lsn, '0/0')::bigint,
      'replay', pg_wal_lsn_diff(replay_lsn, '0/0')::bigint,
      'reply_age', extract(epoch from now() - reply_time)) order by application_name), '[]')
   from pg_stat_replication) as standbys,
  (select wal_status from pg_replication_slots where slot_name = $1) as archive_slot,
  current_setting('server_version_num')::int as version_num,
  current_setting('data_checksums') = 'on' as data_checksums,
  (select coalesce(sum(checksum_failures), 0) from pg_stat_database)::bigint as checksum_failures,
  case when current_setting('ssl') = 'on' then encode(sha256(
    pg_read_binary_file(current_setting('ssl_cert_file'), 0, 1048576, true)), 'hex') end as certificate,
  coalesce(current_setting('ssl') = 'on'
    and (select modification from pg_stat_file(current_setting('ssl_cert_file'), true)) > pg_conf_load_time(),
    false) as reload_due,
  (select coalesce(json_agg(json_build_object('dir', d,
      'info', pg_read_file(v.parent || '/' || d || '/mydb-kept.txt', 0, 4096, true)) order by d), '[]')
   from (select regexp_replace(current_setting('data_directory'), '/[^/]*$', '') as parent) v,
        pg_ls_dir(v.parent, true, false) d
   where d like 'diverged-%') as kept,
  (select coalesce(json_agg(json_build_array(slot_name, active) order by slot_name), '[]')
   from pg_replication_slots where slot_type = 'physical' and starts_with(slot_name::text, $2)) as replica_slots,
  current_setting('primary_slot_name') as slot_name,
  case when not pg_is_in_recovery() then pg_read_file(
    'pg_wal/' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '.history', 0, 65536, true) end as history
"""


async def probe(server: Server, login: Login, connect_seconds: float = CONNECT_SECONDS) -> Probe:
    try:
        async with session(server, login, connect_seconds=connect_seconds) as connection:
            row = await connection.fetchrow(FACTS, names.ARCHIVE_SLOT, names.REPLICA_SLOT_PREFIX)
    except FAILURES as error:
        return Unreachable(server.pod, failure_text(error))
    assert row is not None
    standbys = tuple(
        Standby(s["name"], s["state"], s["sync_state"], s["flush"], s["replay"], s["reply_age"])
        for s in json.loads(row["standbys"])
    )
    return InstanceFacts(
        pod=server.pod,
        in_recovery=row["in_recovery"],
        timeline=row["timeline"],
        wal_lsn=row["wal_lsn"] or 0,
        replay_lsn=row["replay_lsn"],
        receiver=row["receiver"],
        conninfo=row["conninfo"] or "",
        standbys=standbys,
        archive_slot=row["archive_slot"],
        version=server_version(row["version_num"]),
        data_checksums=row["data_checksums"],
        checksum_failures=row["checksum_failures"] or 0,
        certificate=row["certificate"],
        reload_due=row["reload_due"],
        kept=tuple(KeptData(k["dir"], kept_facts(k["info"])) for k in json.loads(row["kept"])),
        replica_slots=tuple((name, bool(active)) for name, active in json.loads(row["replica_slots"])),
        slot_name=row["slot_name"] or "",
        switchpoints=tuple(parse_history(row["history"]).items()),
    )


async def probe_all(servers: list[Server], login: Login) -> dict[str, Probe]:
    answers = await asyncio.gather(*(probe(server, login) for server in servers))
    return {answer.pod: answer for answer in answers}
