#!/bin/sh
# Run by hack/images.sh inside a freshly built postgres image, as uid 999 with
# the chart's scripts at /scripts and no network: proves the image has what
# charts/mydatabase/scripts/ need, by running them the way the pods do.
# primary-init + entrypoint (initdb, pg_ctl, psql, the server with its socket
# in /var/run/postgresql), replica-bootstrap (pg_isready, pg_basebackup),
# backup + prune + restore (pg_dump, sha256sum, pg_restore).
set -eu

for tool in cat cut date dirname grep gzip head id ls mkdir mktemp mv rm sed sleep sort \
            tail touch tr sha256sum postgres initdb pg_ctl pg_isready psql pg_dump \
            pg_restore pg_basebackup; do
  command -v "$tool" >/dev/null || { echo "smoke-test: $tool is missing" >&2; exit 1; }
done
test "$(id -u):$(id -g)" = 999:999

work="$(mktemp -d)"
socket=/var/run/postgresql
# The credentials Secret's files, as the pods mount them.
export PGPORT=5432 CREDENTIALS_DIR="$work/credentials"
mkdir "$CREDENTIALS_DIR"
printf postgres > "$CREDENTIALS_DIR/username"
printf smoke > "$CREDENTIALS_DIR/password"
printf repl > "$CREDENTIALS_DIR/replication-username"
printf 'sm:o\ke' > "$CREDENTIALS_DIR/replication-password"

# The primary, as its pod starts it (no TCP address: nothing to listen on here).
PGDATA="$work/primary" POD_NAME=db-0 LISTEN_ADDRESSES='' sh /scripts/entrypoint.sh \
  > "$work/primary.log" 2>&1 &
server=$!
stop() { pg_ctl -D "$work/primary" -m fast -w stop >/dev/null 2>&1 || true; }
trap 'stop; cat "$work/primary.log"' EXIT
tries=0
until pg_isready -q -h "$socket"; do
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || { echo "smoke-test: the primary did not start" >&2; exit 1; }
  sleep 1
done

. /scripts/credentials.sh
write_passfile "$work/replication.pgpass" repl 'sm:o\ke'
PGDATA="$work/replica" PRIMARY_HOST="$socket" POD_NAME=db-1 REPLICATION_USER=repl \
  REPLICATION_PASSFILE="$work/replication.pgpass" sh /scripts/replica-bootstrap.sh
test -f "$work/replica/standby.signal"

export PGHOST="$socket" BACKUP_DIR="$work/backups"
sh /scripts/backup.sh
BACKUP_RETENTION=1d sh /scripts/prune.sh
PGUSER=postgres PGPASSWORD=smoke psql -q -d postgres -c 'CREATE DATABASE restored'
RESTORE_FROM=latest PGDATABASE=restored sh /scripts/restore.sh

trap - EXIT
stop
wait "$server"
echo "smoke-test: $(postgres --version) ran the chart's scripts"
