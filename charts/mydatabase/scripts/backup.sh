#!/bin/sh
# One logical backup: pg_dump -Fc of one database into
# $BACKUP_DIR/<UTC YYYYmmddTHHMMSSZ>.dump with a sha256sum-compatible
# <name>.dump.sha256 next to it. Files are written under temporary names and
# renamed last, so a listed .dump is always complete and has its checksum.
#
#   PGHOST, PGPORT   the server (libpq reads them)
#   CREDENTIALS_DIR  the credentials as files (credentials.sh); the dump runs
#                    as the superuser, its password in a private password file
#   PGDATABASE   database to dump (default postgres)
#   BACKUP_DIR   target directory
#   LOCK_WAIT_TIMEOUT  how long pg_dump waits for a table's lock (default 600s)
#   SERVER_WAIT_SECONDS  how long to wait for the server to answer first (default 60, credentials.sh)
set -eu

: "${PGHOST:?PGHOST is required}"
: "${BACKUP_DIR:?BACKUP_DIR is required}"
. "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
export PGDATABASE="${PGDATABASE:-postgres}"
private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
connect_as_superuser "$private"

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
name="$stamp.dump"
mkdir -p "$BACKUP_DIR"
if [ -e "$BACKUP_DIR/$name" ]; then
  echo "backup: $BACKUP_DIR/$name already exists" >&2
  exit 1
fi

# A job killed mid-dump (node lost, OOM) never ran its trap. Backups run one
# at a time (concurrencyPolicy: Forbid), so any partial file left is garbage.
rm -f "$BACKUP_DIR"/.*.dump.partial "$BACKUP_DIR"/.*.dump.partial.sha256

partial="$BACKUP_DIR/.$name.partial"
trap 'rm -f "$partial" "$partial.sha256"; rm -rf "$private"' EXIT

wait_for_server "$PGHOST"
# A table someone holds locked (a stuck migration) fails the dump after this wait, with the
# reason, instead of leaving it waiting until the Job's deadline.
pg_dump -Fc --lock-wait-timeout="${LOCK_WAIT_TIMEOUT:-600s}" -f "$partial"
# No pipe: sh has no pipefail, and a checksum that failed must fail the backup, not publish it.
sha256sum "$partial" > "$partial.sha256"
sum="$(cut -d' ' -f1 < "$partial.sha256")"
[ "${#sum}" -eq 64 ] || { echo "backup: no checksum of $partial" >&2; exit 1; }
printf '%s  %s\n' "$sum" "$name" > "$partial.sha256"

# Checksum first, dump last: the dump's appearance marks a finished backup.
mv "$partial.sha256" "$BACKUP_DIR/$name.sha256"
mv "$partial" "$BACKUP_DIR/$name"
echo "backup: wrote $BACKUP_DIR/$name ($PGDATABASE from $PGHOST)"
