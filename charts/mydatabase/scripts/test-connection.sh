#!/bin/sh
# `helm test`: a client's view of a running database. Through the read-write
# Service, as the application's role in its database (CREDENTIALS_DIR holds
# username, password and dbname; without dbname, the superuser's
# credentials in the postgres database), it writes a row and reads it back;
# with replicas, the read-only Service must land on a server in recovery that
# gets the row. It cleans up after itself (the table is dropped).
#
#   RW_HOST, RO_HOST   the read-write and read-only Services
#   PGPORT             the PostgreSQL port
#   REPLICAS           pods in the StatefulSet (the read-only check needs 2+)
#   CREDENTIALS_DIR    the credentials as files (credentials.sh)
set -eu

: "${RW_HOST:?RW_HOST is required}"
: "${RO_HOST:?RO_HOST is required}"
. "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
connect_as_superuser "$private"
PGDATABASE=postgres
[ ! -s "$CREDENTIALS_DIR/dbname" ] || PGDATABASE="$(credential dbname)"
export PGDATABASE PGCONNECT_TIMEOUT=10

sql() {
  host="$1"
  shift
  psql -h "$host" -X -A -t -q -v ON_ERROR_STOP=1 -c "$@"
}

wait_for_server "$RW_HOST"
table=mydatabase_helm_test
mark="$(date +%s)-$$"
sql "$RW_HOST" "create table if not exists $table (mark text primary key)"
trap 'sql "$RW_HOST" "drop table if exists $table" || true; rm -rf "$private"' EXIT
sql "$RW_HOST" "insert into $table values ('$mark')"
test "$(sql "$RW_HOST" "select pg_is_in_recovery()")" = f || { echo "test: $RW_HOST is not the primary" >&2; exit 1; }
test "$(sql "$RW_HOST" "select count(*) from $table where mark = '$mark'")" = 1
echo "test: wrote and read a row through $RW_HOST (the primary)"

if [ "${REPLICAS:-1}" -gt 1 ]; then
  wait_for_server "$RO_HOST"
  test "$(sql "$RO_HOST" "select pg_is_in_recovery()")" = t || { echo "test: $RO_HOST is not a replica" >&2; exit 1; }
  tries=0
  until [ "$(sql "$RO_HOST" "select count(*) from $table where mark = '$mark'" 2>/dev/null)" = 1 ]; do
    tries=$((tries + 1))
    [ "$tries" -lt 30 ] || { echo "test: the row did not reach $RO_HOST in 30 s" >&2; exit 1; }
    sleep 1
  done
  echo "test: read the row back through $RO_HOST (a replica)"
fi
