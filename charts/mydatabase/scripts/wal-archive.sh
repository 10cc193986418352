#!/bin/sh
# The continuous archive: streams the primary's WAL into ARCHIVE_DIR as it is
# written (pg_receivewal --synchronous: each piece is on the archive's disk
# before the primary hears it was received), for ever. The container command
# of the database's archive pod, the one pod that writes ARCHIVE_DIR.
#
#   PGHOST, PGPORT   the read-write Service: after a failover or a switchover
#                    it leads to the new primary, and the archive follows it
#                    onto its new timeline (pg_receivewal fetches the history
#                    file and goes on from the switch)
#   CREDENTIALS_DIR  the replication user's name and password (credentials.sh)
#   BACKUP_DIR       the backup volume (default: ARCHIVE_DIR's parent); an
#                    older major's base backups and WAL there are moved aside
#                    first (archive-major.sh)
#   ARCHIVE_DIR      where the WAL goes: complete segments under their own
#                    names, the one being written as <segment>.partial
#   ARCHIVE_SLOT     the replication slot (default mydb_archive): while the
#                    archive is behind, the primary keeps the WAL it has not
#                    got (max_slot_wal_keep_size bounds how much)
#   RETRY_SECONDS    wait before reconnecting (default 2)
#   STREAMING_FILE   exists while pg_receivewal runs (the readiness probe's
#                    file; default /tmp/streaming)
#
# A slot lives on one server: each connection creates it on whichever server
# is primary now (--if-not-exists), so the archive keeps its place after a
# failover too. Replicas drop a slot they inherited (entrypoint.sh).
set -eu

: "${PGHOST:?PGHOST is required}"
: "${ARCHIVE_DIR:?ARCHIVE_DIR is required}"
. "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
. "${SCRIPTS_DIR:-$(dirname "$0")}/archive-major.sh"
slot="${ARCHIVE_SLOT:-mydb_archive}"
STREAMING_FILE="${STREAMING_FILE:-/tmp/streaming}"
rm -f "$STREAMING_FILE"
private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
PGUSER="$(credential replication-username)"
replication_password="$(credential replication-password)"
write_passfile "$private/pgpass" "$PGUSER" "$replication_password"
export PGUSER PGPASSFILE="$private/pgpass"
settle_major "${BACKUP_DIR:-$(dirname "$ARCHIVE_DIR")}"
mkdir -p "$ARCHIVE_DIR"

# application_name: how the operator finds the archive in pg_stat_replication (and synchronous
# replication never counts it as a replica). Keepalives end a connection to a primary that vanished.
connection="application_name=mydb-archive connect_timeout=5 tcp_user_timeout=10000"
connection="$connection keepalives_idle=10 keepalives_interval=5 keepalives_count=3"

# Kubernetes stops the pod with SIGTERM to this shell, PID 1 of its container, which ignores any signal it
# has no trap for: every deletion, roll and drain of the pod waited out its 30 s grace period. The stream
# runs in the background so that the trap runs at once; SIGINT is pg_receivewal's clean stop, and with
# --synchronous everything it acknowledged is on disk already.
streamer=""
stop() {
  if [ -n "$streamer" ]; then
    kill -INT "$streamer" 2>/dev/null || true
    wait "$streamer" 2>/dev/null || true
  fi
  exit 0
}
trap stop TERM INT

while :; do
  if pg_receivewal -d "$connection" --slot="$slot" --create-slot --if-not-exists --no-password; then
    # --synchronous flushes each write; --no-loop hands a lost connection back here, to make the slot
    # on the server that is primary now before streaming from it again; a reply every 5 s when idle
    # tells the operator the archive is alive (policy/archive.py).
    touch "$STREAMING_FILE"
    pg_receivewal -d "$connection" -D "$ARCHIVE_DIR" --slot="$slot" --synchronous --no-loop \
      --status-interval=5 --no-password &
    streamer=$!
    wait "$streamer" || echo "wal-archive: streaming from $PGHOST stopped; reconnecting" >&2
    streamer=""
    rm -f "$STREAMING_FILE"
  else
    echo "wal-archive: cannot reach a primary at $PGHOST:${PGPORT:-5432} to make slot $slot; retrying" >&2
  fi
  sleep "${RETRY_SECONDS:-2}"
done
