#!/bin/sh
# Makes an existing data directory fit to stream from the recorded primary.
#
# - A former primary (no standby.signal): the primary moved (a failover or a
#   switchover). Its last writes may never have reached the new primary
#   (asynchronous replication), so it cannot simply follow it: once the new
#   primary is one (the operator promotes it after fencing this pod), pg_rewind
#   takes this directory back to where the new primary's timeline forked off.
# - A standby, with REWIND_STANDBY=true (the pod's init container): one that
#   kept streaming from the old primary past the point where the promoted
#   replica's timeline forked off (the old primary was not fenced yet) holds
#   WAL that is on no timeline of the new primary: PostgreSQL refuses to start
#   it ("requested timeline N does not contain minimum recovery point"), or
#   replays that WAL from pg_wal and then never streams. Compared with the
#   primary's timeline history (its pg_wal/<TLI>.history), this data's WAL on
#   each older timeline must end at or before where the primary left that
#   timeline (pg_controldata's latest checkpoint and minimum recovery point,
#   and what pg_waldump reads in pg_wal from there on). A standby that did not
#   diverge (behind, or killed, on the primary's history) starts as it is, no
#   rewind. One that diverged is rewound like a former primary; one that was
#   not shut down cleanly (killed, crash-looping) is first replayed to the end
#   of its own WAL as a standby of nobody (standby.signal stays: never
#   writable; no TCP, no primary, a socket in a private directory) and shut
#   down there by PostgreSQL itself (recovery_target_action=shutdown), so
#   pg_rewind sees all it had. pg_rewind's own crash recovery cannot do that:
#   it runs single-user mode, which refuses standby mode.
#   With REWIND_STANDBY=check (entrypoint.sh serve), only that finding: exit 4.
# Either way, the log names the WAL thrown away: from where the servers
# diverged (pg_rewind's line) to where this data's WAL ended.
#
# Exit 0: PGDATA can follow (standby.signal is there). Exit 3: pg_rewind failed
# (or the standby's replay did) and only a fresh clone helps: entrypoint.sh
# init keeps this directory aside on the volume (never removes it: a former
# primary's may hold commits the new primary never received) and makes one.
# Exit 4 (REWIND_STANDBY=check only): this standby diverged; nothing changed.
# Exit 1: anything else, such as a primary that is another database system
# altogether.
#
#   PGDATA, PGPORT (default 5432), PRIMARY_HOST, PRIMARY_PORT (default PGPORT)
#   CREDENTIALS_DIR  the superuser's credentials (pg_rewind reads the primary's files)
#   REWIND_STANDBY   true: check a standby too, and rewind it; check: only
#                    say whether it diverged (exit 4); default false
#   PRIMARY_WAIT_SECONDS  how long a former primary waits for the new one (default 0: for ever)
#   STANDBY_PRIMARY_WAIT_SECONDS  how long a standby (REWIND_STANDBY=true) waits for it (default 20)
#   REPLAY_WAIT_SECONDS   how long a standby's replay to its end may take (default 3600)
#   PEER_SSL         conninfo keywords for TLS to the primary (entrypoint.sh), or empty
#   DIVERGED_AT_FILE on exit 3, gets the LSN where the servers diverged
#                    (pg_rewind's, else the primary's history's; empty when
#                    neither said): the kept data's divergedAt
set -eu

: "${PGDATA:?PGDATA is required}"
: "${PRIMARY_HOST:?PRIMARY_HOST is required}"
PGPORT="${PGPORT:-5432}"
PRIMARY_PORT="${PRIMARY_PORT:-$PGPORT}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"

private="$(mktemp -d)"
replay_pid=""
# A standby's replay (below) is never left running.
trap 'if [ -n "$replay_pid" ]; then kill -INT "$replay_pid" 2>/dev/null || true; wait "$replay_pid" || true; fi
  rm -rf "$private"' EXIT
connect_as_superuser "$private"
source_server="host=$PRIMARY_HOST port=$PRIMARY_PORT dbname=postgres connect_timeout=5 ${PEER_SSL:-}"

# on_primary SQL: the primary's answer, empty when it does not answer.
on_primary() {
  psql "$source_server" -XAtq -c "$1" 2>/dev/null || true
}

control() {
  pg_controldata -D "$PGDATA" | sed -n "s/^$1: *//p"
}

# An LSN (X/Y, hexadecimal) as a number, and back.
lsn_number() {
  echo $(( (0x${1%/*} << 32) + 0x${1#*/} ))
}
lsn_text() {
  printf '%X/%X\n' $(( $1 >> 32 )) $(( $1 & 0xFFFFFFFF ))
}

# primary_history: primary_tli, the primary's timeline, and $private/history, the
# timelines before it as "TLI SWITCHPOINT" lines (where the primary left each
# one). Fails when the primary does not tell.
primary_history() {
  tli_hex="$(on_primary 'select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)')"
  case "$tli_hex" in
    [0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]) ;;
    *) return 1 ;;
  esac
  primary_tli=$((0x$tli_hex))
  : > "$private/history"
  if [ "$primary_tli" -gt 1 ]; then
    psql "$source_server" -XAtq -c "select pg_read_file('pg_wal/$tli_hex.history')" \
      > "$private/history.file" 2>/dev/null || return 1
    awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9A-F]+\/[0-9A-F]+$/ { print $1, $2 }' "$private/history.file" > "$private/history"
  fi
}

# find_divergence: whether this data holds WAL on no timeline of the primary's
# history (primary_history first). Sets fork (where the primary left the first
# such timeline, empty when that timeline is not on its history at all),
# diverged_tli (the last such timeline), last_record (the start of this data's
# last WAL record on it, empty when pg_wal holds none past the fork) and
# wal_end (a number: the end of this data's WAL there).
find_divergence() {
  fork=""; diverged_tli=""; last_record=""; wal_end=0
  segment_bytes="$(control 'Bytes per WAL segment')"
  checkpoint="$(lsn_number "$(control 'Latest checkpoint location')")"
  checkpoint_tli="$(control "Latest checkpoint's TimeLineID")"
  min_recovery="$(lsn_number "$(control 'Minimum recovery ending location')")"
  min_recovery_tli="$(control "Min recovery ending loc's timeline")"
  segments="$(cd "$PGDATA/pg_wal" && printf '%s\n' * | { grep -E '^[0-9A-F]{24}$' || true; } | sort)"
  timelines="$(
    { echo "$checkpoint_tli"; echo "$min_recovery_tli"
      for hex in $(printf '%s\n' "$segments" | cut -c 1-8 | sort -u); do echo $((0x$hex)); done
    } | grep -v '^0*$' | sort -n -u)"
  for tli in $timelines; do
    [ "$tli" -ne "$primary_tli" ] || continue
    switch="$(awk -v tli="$tli" '$1 == tli { print $2; exit }' "$private/history")"
    from=0
    [ -z "$switch" ] || from="$(lsn_number "$switch")"
    end=0
    if [ "$checkpoint_tli" -eq "$tli" ] && [ "$checkpoint" -ge "$from" ]; then
      end="$checkpoint"
    fi
    if [ "$min_recovery_tli" -eq "$tli" ] && [ "$min_recovery" -gt "$from" ] && [ "$min_recovery" -gt "$end" ]; then
      end="$min_recovery"
    fi
    # What pg_wal holds on this timeline from the fork on (pg_waldump walks valid records only).
    first="$(printf '%s\n' "$segments" | grep "^$(printf '%08X' "$tli")" | head -n 1 || true)"
    record=""
    if [ -n "$first" ]; then
      start=$(( (0x$(echo "$first" | cut -c 9-16) << 32) + 0x$(echo "$first" | cut -c 17-24) * segment_bytes ))
      [ "$start" -ge "$from" ] || start="$from"
      record="$(pg_waldump -p "$PGDATA/pg_wal" -t "$tli" -s "$(lsn_text "$start")" 2> "$private/waldump.err" \
        | tail -n 1 | sed -n 's/.* lsn: \([0-9A-F]*\/[0-9A-F]*\),.*/\1/p')"
    fi
    if [ -n "$record" ]; then
      record="$(lsn_text "$(lsn_number "$record")")"
      # Where the next record would have begun ("invalid record length at X"): the end of the WAL.
      for lsn in $record $(grep -oE ' at [0-9A-F]+/[0-9A-F]+' "$private/waldump.err" | cut -c 5- || true); do
        [ "$(lsn_number "$lsn")" -le "$end" ] || end="$(lsn_number "$lsn")"
      done
    fi
    [ "$end" -gt 0 ] || continue    # nothing of this data past the fork on this timeline
    if [ -z "$diverged_tli" ]; then fork="$switch"; fi
    diverged_tli="$tli"
    last_record="$record"
    wal_end="$end"
  done
  [ -n "$diverged_tli" ]
}

# replay_to_end: a standby that was not shut down cleanly, replayed to its last
# WAL record and shut down there (find_divergence first).
replay_to_end() {
  if [ -z "$last_record" ]; then
    echo "follow: pg_wal holds none of this standby's WAL past the fork: it cannot be replayed to its end" >&2
    return 1
  fi
  echo "follow: replaying this standby's own WAL to its end, $last_record on timeline $diverged_tli, as a standby of nobody, to shut it down cleanly"
  postgres -D "$PGDATA" -p "$PGPORT" -c listen_addresses= -c unix_socket_directories="$private" \
    -c primary_conninfo= -c primary_slot_name= -c restore_command= -c archive_mode=off \
    -c hot_standby=off -c logging_collector=off -c recovery_target_timeline="$diverged_tli" \
    -c recovery_target_lsn="$last_record" -c recovery_target_inclusive=on \
    -c recovery_target_action=shutdown > "$private/replay.log" 2>&1 &
  replay_pid=$!
  deadline=$(( $(date +%s) + ${REPLAY_WAIT_SECONDS:-3600} ))
  while kill -0 "$replay_pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "follow: the replay did not reach $last_record in ${REPLAY_WAIT_SECONDS:-3600} s: stopping it" >&2
      kill -INT "$replay_pid" 2>/dev/null || true
      wait "$replay_pid" || true
      replay_pid=""
      sed 's/^/follow: replay: /' "$private/replay.log" >&2
      return 1
    fi
    sleep 1
  done
  code=0
  wait "$replay_pid" || code=$?
  replay_pid=""
  replayed="$(lsn_number "$(control 'Minimum recovery ending location')")"
  if [ "$code" -ne 0 ] || [ "$(control 'Database cluster state')" != "shut down in recovery" ] \
      || [ "$replayed" -le "$(lsn_number "$last_record")" ]; then
    sed 's/^/follow: replay: /' "$private/replay.log" >&2
    echo "follow: the replay did not end at $last_record (exit $code, minimum recovery point $(lsn_text "$replayed"))" >&2
    return 1
  fi
  grep -E 'recovery stopping|shutdown at recovery target' "$private/replay.log" | sed 's/^/follow: replay: /'
  [ "$replayed" -le "$wal_end" ] || wal_end="$replayed"
}

# fail_rewind WHY: exit 3, the data kept aside and a clone made (entrypoint.sh init).
fail_rewind() {
  if [ -n "${DIVERGED_AT_FILE:-}" ]; then
    { sed -n 's/.*servers diverged at WAL location \([0-9A-F]*\/[0-9A-F]*\) on timeline .*/\1/p' \
        "$private/rewind.log" 2>/dev/null | grep . || echo "${fork:-}"; } | head -n 1 > "$DIVERGED_AT_FILE"
  fi
  echo "follow: $1: this pod needs a fresh clone of $PRIMARY_HOST" >&2
  exit 3
}

standby=false
if [ -f "$PGDATA/standby.signal" ]; then
  standby=true
  case "${REWIND_STANDBY:-false}" in
    true | check) ;;
    *) exit 0 ;;
  esac
  # The init container may run before the network lets this new pod in (a policy engine adds its address a
  # moment later): a standby that diverged must not start as it is for want of one answer. Bounded: a primary
  # that is down must not hold a replica back for long.
  deadline=$(( $(date +%s) + ${STANDBY_PRIMARY_WAIT_SECONDS:-20} ))
  until [ "$(on_primary 'select pg_is_in_recovery()')" = f ]; do
    if [ "$REWIND_STANDBY" = check ] || [ "$(date +%s)" -ge "$deadline" ]; then
      [ "$REWIND_STANDBY" = check ] || echo "follow: $PRIMARY_HOST does not answer as a primary: this standby starts as it is"
      exit 0
    fi
    sleep 1
  done
else
  echo "follow: $PGDATA was a primary; $PRIMARY_HOST is the primary now"
  deadline=$(( $(date +%s) + ${PRIMARY_WAIT_SECONDS:-0} ))
  waited=0
  until [ "$(on_primary 'select pg_is_in_recovery()')" = f ]; do
    if [ "${PRIMARY_WAIT_SECONDS:-0}" -gt 0 ] && [ "$(date +%s)" -ge "$deadline" ]; then
      echo "follow: $PRIMARY_HOST is not a primary yet" >&2
      exit 1
    fi
    if [ $((waited % 30)) -eq 0 ]; then
      echo "follow: waiting for $PRIMARY_HOST to be promoted before rewinding"
    fi
    sleep 1
    waited=$((waited + 1))
  done
fi

# pg_rewind would copy one database's files over another's: refuse, loudly.
ours="$(control 'Database system identifier')"
theirs="$(on_primary 'select system_identifier from pg_control_system()')"
if [ "$ours" != "$theirs" ]; then
  if [ "${REWIND_STANDBY:-false}" = check ] && [ "$standby" = true ]; then
    exit 0    # the init container's to refuse
  fi
  echo "follow: $PRIMARY_HOST is database system ${theirs:-(no answer)}, this data is $ours: refusing to rewind or replace it" >&2
  exit 1
fi

diverged=unknown
if command -v pg_waldump > /dev/null && primary_history; then
  if find_divergence; then
    diverged=true
    if [ -n "$fork" ]; then
      echo "follow: this data's WAL on timeline $diverged_tli goes on past $fork, where $PRIMARY_HOST's timeline $primary_tli forked off it, to $(lsn_text "$wal_end"): $PRIMARY_HOST has none of that"
    else
      echo "follow: this data's WAL on timeline $diverged_tli (to $(lsn_text "$wal_end")) is on no timeline of $PRIMARY_HOST's history (timeline $primary_tli)"
    fi
  else
    diverged=false
  fi
fi

if [ "$standby" = true ]; then
  state="$(control 'Database cluster state')"
  case "$diverged" in
    false)
      if [ "$REWIND_STANDBY" = true ]; then
        echo "follow: this standby has not diverged from $PRIMARY_HOST's history (timeline $primary_tli): it starts as it is"
      fi
      exit 0 ;;
    unknown)
      if [ "$REWIND_STANDBY" = check ]; then exit 0; fi
      echo "follow: $PRIMARY_HOST's timeline history cannot be read: pg_rewind decides"
      if [ "$state" != "shut down in recovery" ]; then
        echo "follow: this standby was not shut down cleanly; it starts as it is"
        exit 0
      fi ;;
    true)
      if [ "$REWIND_STANDBY" = check ]; then
        echo "follow: this standby cannot follow $PRIMARY_HOST: its pod's init container rewinds it onto timeline $primary_tli" >&2
        exit 4
      fi
      # A killed standby left its lock file (see below).
      rm -f "$PGDATA/postmaster.pid"
      if [ "$state" != "shut down in recovery" ] || [ "$(lsn_number "${last_record:-0/0}")" -ge \
          "$(lsn_number "$(control 'Minimum recovery ending location')")" ]; then
        replay_to_end || fail_rewind "the replay of this standby to its end failed"
      fi ;;
  esac
fi

# A former primary that was killed left its lock file. Nothing else runs on this
# volume (the pod's server starts after this; the pod it replaced has stopped),
# but pg_rewind's single-user recovery would take the PID in it, 1, for a live
# postmaster: in this container PID 1 is the shell that runs this.
rm -f "$PGDATA/postmaster.pid"

# pg_rewind reads the primary's timeline from its control file, which a promotion
# updates only at the next checkpoint: right after one it would see no fork.
on_primary 'checkpoint' > /dev/null

set --
if [ "$standby" = true ]; then
  set -- --no-ensure-shutdown   # shut down cleanly above; crash recovery of a standby would end its recovery
fi
if ! pg_rewind --target-pgdata="$PGDATA" --source-server="$source_server" "$@" > "$private/rewind.log" 2>&1; then
  sed 's/^/follow: pg_rewind: /' "$private/rewind.log" >&2
  fail_rewind "pg_rewind failed"
fi
sed 's/^/follow: pg_rewind: /' "$private/rewind.log"
diverged_at="$(sed -n 's/.*servers diverged at WAL location \([0-9A-F]*\/[0-9A-F]*\) on timeline \([0-9]*\).*/\1 \2/p' \
  "$private/rewind.log" | head -n 1)"
if [ -n "$diverged_at" ]; then
  end="the end of its WAL"
  if [ "$diverged" = true ] && [ "$wal_end" -gt "$(lsn_number "${diverged_at% *}")" ]; then
    end="$(lsn_text "$wal_end")"
  fi
  echo "follow: discarded this data's WAL from ${diverged_at% *} to $end (timeline ${diverged_at#* }, not $PRIMARY_HOST's): what it holds there is lost, as asynchronous replication loses it"
fi
if [ "$standby" = true ] && [ "$diverged" != unknown ] && primary_history && find_divergence; then
  fail_rewind "this standby still holds WAL past the fork after pg_rewind (timeline $diverged_tli, to $(lsn_text "$wal_end"))"
fi
touch "$PGDATA/standby.signal"
exit 0
