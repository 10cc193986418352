#!/bin/sh
# Creates the primary's cluster once: initdb, superuser password, replication
# role, pg_hba rules. Does nothing when PGDATA already holds a cluster, so it is
# safe on every start.
#
#   PGDATA, PGPORT (default 5432)
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD
#   REPLICATION_USER, REPLICATION_PASSWORD
set -eu

: "${PGDATA:?PGDATA is required}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
: "${REPLICATION_USER:?REPLICATION_USER is required}"
: "${REPLICATION_PASSWORD:?REPLICATION_PASSWORD is required}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
PGPORT="${PGPORT:-5432}"

if [ -s "$PGDATA/PG_VERSION" ]; then
  echo "primary-init: $PGDATA already initialised"
  exit 0
fi
# Never delete what we did not create: a non-empty PGDATA without PG_VERSION
# needs a human.
if [ -d "$PGDATA" ] && [ -n "$(ls -A "$PGDATA")" ]; then
  echo "primary-init: $PGDATA is not empty but holds no cluster; refusing to touch it" >&2
  exit 1
fi

# Build the cluster in a side directory and rename it at the end: a pod killed
# half-way must not leave something that looks like a finished cluster.
new="$PGDATA.init"
rm -rf "$new"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Passwords go through a file and the environment, never the command line
# (visible in ps) and never into shell-expanded SQL (quoting bugs, injection).
printf '%s\n' "$POSTGRES_PASSWORD" > "$work/pwfile"
initdb -D "$new" -U "$POSTGRES_USER" --pwfile="$work/pwfile" \
  --auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8

# Replicas and clients come from other pods; everyone must authenticate.
cat >> "$new/pg_hba.conf" <<HBA

# Added by primary-init.sh: streaming replication and clients from any address.
host replication "$REPLICATION_USER" all scram-sha-256
host all all all scram-sha-256
HBA

# A private server (unix socket in $work, no TCP) for the one-time SQL, so no
# client can connect before the setup is complete.
pg_ctl -D "$new" -w -l "$work/init.log" \
  -o "-c listen_addresses='' -c unix_socket_directories='$work' -p $PGPORT" start \
  || { cat "$work/init.log" >&2; exit 1; }
# If the SQL fails, do not leave the private server running.
trap 'pg_ctl -D "$new" -m immediate -w stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

PGPASSWORD="$POSTGRES_PASSWORD" psql -h "$work" -p "$PGPORT" -U "$POSTGRES_USER" \
  -d postgres -v ON_ERROR_STOP=1 -q <<'SQL'
\getenv repl_user REPLICATION_USER
\getenv repl_password REPLICATION_PASSWORD
CREATE ROLE :"repl_user" WITH REPLICATION LOGIN PASSWORD :'repl_password';
SQL

pg_ctl -D "$new" -m fast -w stop
rm -rf "$PGDATA"   # empty (checked above) or absent
mv "$new" "$PGDATA"
echo "primary-init: initialised $PGDATA"
