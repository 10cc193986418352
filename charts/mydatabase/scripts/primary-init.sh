#!/bin/sh
# Creates the primary's cluster once: initdb, superuser password, replication
# role and, with RESTORE_FROM, the data of another database's
# dump. Does nothing when PGDATA already holds a cluster, so it is safe on
# every start.
#
#   PGDATA, PGPORT (default 5432)
#   CREDENTIALS_DIR  username, password, replication-username and
#                    replication-password as files (credentials.sh)
#   RESTORE_FROM   optional: "latest" recovers from the other database's
#                  continuous archive when it has a base backup (recover.sh),
#                  else restores its newest dump; a dump's file name in
#                  RESTORE_DIR, or a path, restores that dump (restore.sh)
#   RESTORE_TARGET_TIME  optional: recover to this moment (RFC 3339) instead
#                  of the archive's end
#   RESTORE_DIR    the other database's backups
#   SCRIPTS_DIR    where restore.sh is (default: this script's directory)
#
# Restore on first boot, and only then: the dump goes into the cluster while
# it is still being built in a side directory, served by a private server that
# listens on no TCP address, so no client ever sees a half-restored database.
# Only a successful restore writes the marker PGDATA/.restored-from (the dump's
# name) and renames the directory into place, both at once. A failure exits
# non-zero (the pod crash-loops, visibly) and leaves PGDATA untouched, so the
# next start throws the side directory away and tries again from initdb.
set -eu

: "${PGDATA:?PGDATA is required}"
PGPORT="${PGPORT:-5432}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"
RESTORE_FROM="${RESTORE_FROM:-}"
marker=.restored-from

if [ -s "$PGDATA/PG_VERSION" ]; then
  echo "primary-init: $PGDATA already initialised"
  # An existing database is never overwritten by a restore.
  if [ -n "$RESTORE_FROM" ]; then
    if [ -f "$PGDATA/$marker" ]; then
      echo "primary-init: restored from $(head -n 1 "$PGDATA/$marker") on first boot; not restoring again"
    else
      echo "primary-init: RESTORE_FROM=$RESTORE_FROM ignored: this cluster was not created by a restore" >&2
    fi
  fi
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

# A recovery from the archive copies a whole cluster: no initdb.
. "$SCRIPTS_DIR/archive-major.sh"
has_base_backup() {
  [ -n "${RESTORE_DIR:-}" ] && [ -n "$(stamps "$(recovery_dir "$RESTORE_DIR")/base")" ]
}
if [ -n "$RESTORE_FROM" ] && { [ -n "${RESTORE_TARGET_TIME:-}" ] || { [ "$RESTORE_FROM" = latest ] && has_base_backup; }; }; then
  echo "primary-init: recovering from the archive in ${RESTORE_DIR:-(no RESTORE_DIR)} before serving"
  RECOVER_INTO="$new" sh "$SCRIPTS_DIR/recover.sh" || {
    echo "primary-init: recovery failed; $PGDATA stays empty and the next start tries again" >&2
    rm -rf "$new"
    exit 1
  }
  printf 'archive %s\n' "${RESTORE_TARGET_TIME:-end}" > "$new/$marker"
  rm -rf "$PGDATA"   # empty (checked above) or absent
  mv "$new" "$PGDATA"
  echo "primary-init: initialised $PGDATA from the archive (to ${RESTORE_TARGET_TIME:-its end})"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

superuser="$(credential username)"
password="$(credential password)"
replication_user="$(credential replication-username)"
replication_password="$(credential replication-password)"
# Passwords go through files (and psql's stdin for the one SQL statement,
# as escaped psql variables), never the command line (visible in ps) and
# never into shell-expanded SQL (quoting bugs, injection).
printf '%s\n' "$password" > "$work/pwfile"
write_passfile "$work/pgpass" "$superuser" "$password"
# Data checksums: a page damaged on disk (not through PostgreSQL) is an error when read, and a verification of
# a backup that copied it finds it (verify.sh).
initdb -D "$new" -U "$superuser" --pwfile="$work/pwfile" \
  --auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8 --data-checksums

# Who may connect over TCP is entrypoint.sh's (a pg_hba.conf written at each start): PGDATA's is initdb's.
# A private server (unix socket in $work, no TCP) for the one-time SQL, so no
# client can connect before the setup is complete.
pg_ctl -D "$new" -w -l "$work/init.log" \
  -o "-c listen_addresses='' -c unix_socket_directories='$work' -p $PGPORT" start \
  || { cat "$work/init.log" >&2; exit 1; }
# If the SQL fails, do not leave the private server running.
trap 'pg_ctl -D "$new" -m immediate -w stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# The names and password reach psql as variables set on its stdin (its getenv command is 15's, and
# the chart runs 13 to 17): a meta-command's quoted argument takes '' for ' and \\ for \,
# and psql quotes the values for SQL itself (:"name", :'literal').
repl_user_arg="$(psql_quoted "$replication_user")"
repl_password_arg="$(psql_quoted "$replication_password")"
PGPASSFILE="$work/pgpass" psql -h "$work" -p "$PGPORT" -U "$superuser" \
  -d postgres -v ON_ERROR_STOP=1 -q <<SQL
\\set repl_user '$repl_user_arg'
\\set repl_password '$repl_password_arg'
CREATE ROLE :"repl_user" WITH REPLICATION LOGIN PASSWORD :'repl_password';
SQL

if [ -n "$RESTORE_FROM" ]; then
  # Checksum first, then one pg_restore transaction into the postgres
  # database, through the private socket. restore.sh writes the marker into
  # the side directory only after pg_restore succeeded.
  echo "primary-init: restoring $RESTORE_FROM from ${RESTORE_DIR:-(no RESTORE_DIR)} before serving"
  RESTORE_MARKER="$new/$marker" BACKUP_DIR="${RESTORE_DIR:-}" \
    PGHOST="$work" PGUSER="$superuser" PGPASSFILE="$work/pgpass" PGDATABASE=postgres \
    sh "$SCRIPTS_DIR/restore.sh" || {
      echo "primary-init: restore of $RESTORE_FROM failed; $PGDATA stays empty and the next start tries again" >&2
      pg_ctl -D "$new" -m immediate -w stop >/dev/null 2>&1 || true
      rm -rf "$new"
      exit 1
    }
fi

pg_ctl -D "$new" -m fast -w stop
rm -rf "$PGDATA"   # empty (checked above) or absent
mv "$new" "$PGDATA"
if [ -n "$RESTORE_FROM" ]; then
  echo "primary-init: initialised $PGDATA from $(head -n 1 "$PGDATA/$marker")"
else
  echo "primary-init: initialised $PGDATA"
fi
