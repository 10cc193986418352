#!/bin/sh
# Clones the primary into an empty PGDATA with pg_basebackup and marks it a
# standby (standby.signal), so the server starts as a streaming replica; the
# connection to the primary is entrypoint.sh's (primary_conninfo on the
# command line, no password in it). Does nothing when PGDATA already holds a
# cluster.
#
#   PGDATA, PGPORT (default 5432), PRIMARY_HOST
#   PRIMARY_PORT          default PGPORT (differs only when both run on one host)
#   REPLICATION_PASSFILE  a libpq password file for the replication user
#                         (entrypoint.sh writes it from CREDENTIALS_DIR)
#   REPLICATION_USER      the replication user
#   PRIMARY_WAIT_SECONDS  how long to wait for the primary (default 600)
#   PEER_SSL              conninfo keywords for TLS to the primary (entrypoint.sh), or empty
#
# The clone streams its WAL without a slot (-X stream makes a temporary one);
# the replica's own slot is entrypoint.sh's and the operator's.
set -eu

: "${PGDATA:?PGDATA is required}"
: "${PRIMARY_HOST:?PRIMARY_HOST is required}"
: "${REPLICATION_USER:?REPLICATION_USER is required}"
: "${REPLICATION_PASSFILE:?REPLICATION_PASSFILE is required}"
PGPORT="${PGPORT:-5432}"
PRIMARY_PORT="${PRIMARY_PORT:-$PGPORT}"

if [ -s "$PGDATA/PG_VERSION" ]; then
  echo "replica-bootstrap: $PGDATA already initialised"
  exit 0
fi
# Never delete what we did not create: a non-empty PGDATA without PG_VERSION
# needs a human.
if [ -d "$PGDATA" ] && [ -n "$(ls -A "$PGDATA")" ]; then
  echo "replica-bootstrap: $PGDATA is not empty but holds no cluster; refusing to touch it" >&2
  exit 1
fi

# After a full restart the primary may still be starting; after a failover the
# recorded primary may not be promoted yet: a clone of it would not follow it.
is_primary() {
  psql "host=$PRIMARY_HOST port=$PRIMARY_PORT user=$REPLICATION_USER dbname=postgres connect_timeout=5 ${PEER_SSL:-}" \
    -XAtq -c 'select pg_is_in_recovery()' 2>/dev/null | grep -qx f
}
deadline=$(( $(date +%s) + ${PRIMARY_WAIT_SECONDS:-600} ))
until PGPASSFILE="$REPLICATION_PASSFILE" is_primary; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "replica-bootstrap: $PRIMARY_HOST:$PRIMARY_PORT is not a ready primary" >&2
    exit 1
  fi
  sleep 2
done

# Clone into a side directory and rename at the end: a half-finished clone
# must never look like a data directory on the next start.
tmp="$PGDATA.bootstrap"
rm -rf "$tmp"
# No probe watches the init container: keepalives and a TCP user timeout end a
# clone whose primary vanished without closing the connection (the pod then
# restarts and clones again) instead of leaving it waiting forever.
PGPASSFILE="$REPLICATION_PASSFILE" pg_basebackup \
  -d "tcp_user_timeout=10000 keepalives_idle=10 keepalives_interval=5 keepalives_count=3 ${PEER_SSL:-}" \
  -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U "$REPLICATION_USER" -w \
  -D "$tmp" -X stream -c fast
touch "$tmp/standby.signal"
rm -rf "$PGDATA"   # empty (checked above) or absent
mv "$tmp" "$PGDATA"
echo "replica-bootstrap: cloned $PRIMARY_HOST into $PGDATA"
