#!/bin/sh
# Makes an existing data directory fit to stream from the recorded primary.
#
# - A former primary (no standby.signal): the primary moved (a failover or a
#   switchover). Its last writes may never have reached the new primary
#   (asynchronous replication), so it cannot simply follow it: once the new
#   primary is one (the operator promotes it after fencing this pod), pg_rewind
#   takes this directory back to where the new primary's timeline forked off.
# - A standby, with REWIND_STANDBY=true (the pod's init container): one that
#   had received more WAL than the replica the operator promoted cannot follow
#   it either. When the primary answers now and this standby was shut down
#   cleanly, pg_rewind finds out ("no rewind required" for every other one);
#   otherwise the server starts as the standby it is.
#
# Exit 0: PGDATA can follow (standby.signal is there). Exit 3: pg_rewind failed
# and only a fresh clone helps: entrypoint.sh init keeps this directory aside
# on the volume (never removes it: a former primary's may hold commits the new
# primary never received) and makes one. Exit 1: anything else, such as a
# primary that is another database system altogether.
#
#   PGDATA, PGPORT (default 5432), PRIMARY_HOST, PRIMARY_PORT (default PGPORT)
#   CREDENTIALS_DIR  the superuser's credentials (pg_rewind reads the primary's files)
#   REWIND_STANDBY   true: check a standby too (default false)
#   PRIMARY_WAIT_SECONDS  how long a former primary waits for the new one (default 0: for ever)
#   PEER_SSL         conninfo keywords for TLS to the primary (entrypoint.sh), or empty
#   DIVERGED_AT_FILE on exit 3, gets the LSN where pg_rewind found the servers
#                    diverged (empty when it did not say): the kept data's divergedAt
set -eu

: "${PGDATA:?PGDATA is required}"
: "${PRIMARY_HOST:?PRIMARY_HOST is required}"
PGPORT="${PGPORT:-5432}"
PRIMARY_PORT="${PRIMARY_PORT:-$PGPORT}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"

private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
connect_as_superuser "$private"
source_server="host=$PRIMARY_HOST port=$PRIMARY_PORT dbname=postgres connect_timeout=5 ${PEER_SSL:-}"

# on_primary SQL: the primary's answer, empty when it does not answer.
on_primary() {
  psql "$source_server" -XAtq -c "$1" 2>/dev/null || true
}

control() {
  pg_controldata -D "$PGDATA" | sed -n "s/^$1: *//p"
}

if [ -f "$PGDATA/standby.signal" ]; then
  if [ "${REWIND_STANDBY:-false}" != true ] || [ "$(on_primary 'select pg_is_in_recovery()')" != f ]; then
    exit 0
  fi
  if [ "$(control 'Database cluster state')" != "shut down in recovery" ]; then
    echo "follow: this standby was not shut down cleanly; it starts as it is"
    exit 0
  fi
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
  echo "follow: $PRIMARY_HOST is database system ${theirs:-(no answer)}, this data is $ours: refusing to rewind or replace it" >&2
  exit 1
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
if [ -f "$PGDATA/standby.signal" ]; then
  set -- --no-ensure-shutdown   # checked above; crash recovery of a standby would end its recovery
fi
if pg_rewind --target-pgdata="$PGDATA" --source-server="$source_server" "$@" > "$private/rewind.log" 2>&1; then
  sed 's/^/follow: pg_rewind: /' "$private/rewind.log"
  touch "$PGDATA/standby.signal"
  exit 0
fi
sed 's/^/follow: pg_rewind: /' "$private/rewind.log" >&2
if [ -n "${DIVERGED_AT_FILE:-}" ]; then
  sed -n 's/.*servers diverged at WAL location \([0-9A-F]*\/[0-9A-F]*\) on timeline .*/\1/p' "$private/rewind.log" \
    | head -n 1 > "$DIVERGED_AT_FILE"
fi
echo "follow: pg_rewind failed: this pod needs a fresh clone of $PRIMARY_HOST" >&2
exit 3
