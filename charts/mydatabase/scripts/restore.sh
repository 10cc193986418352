#!/bin/sh
# Restores one dump written by backup.sh into an existing, empty database.
# The checksum is verified first; pg_restore then runs in one transaction and
# stops at the first error, so a failed restore leaves the target unchanged.
# Owners and grants are restored as dumped: roles they name must exist.
#
#   RESTORE_FROM   a dump's path, a dump's file name in BACKUP_DIR, or
#                  "latest" (the newest dump in BACKUP_DIR)
#   BACKUP_DIR     where backup.sh writes (for "latest" and bare file names)
#   PGHOST, PGPORT, PGUSER, PGPASSFILE   the target server (libpq reads them)
#   CREDENTIALS_DIR  without PGUSER: connect as the superuser of these
#                    credentials (credentials.sh), as in a backup Job's pod
#   PGDATABASE     the target database (default postgres)
#   RESTORE_MARKER optional file; after a successful restore it gets the dump's
#                  file name (line 1) and its sha256 (line 2)
set -eu

: "${RESTORE_FROM:?RESTORE_FROM is required (a dump path, a name in BACKUP_DIR, or latest)}"
: "${PGHOST:?PGHOST is required}"
if [ -z "${PGUSER:-}" ] && [ -n "${CREDENTIALS_DIR:-}" ]; then
  . "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
  private="$(mktemp -d)"
  trap 'rm -rf "$private"' EXIT
  connect_as_superuser "$private"
fi
: "${PGUSER:?PGUSER is required}"
export PGDATABASE="${PGDATABASE:-postgres}"

case "$RESTORE_FROM" in
  latest)
    : "${BACKUP_DIR:?BACKUP_DIR is required with RESTORE_FROM=latest}"
    # Same names as prune.sh (stamps.sh): stamps sort in time order; .partial files never match.
    . "${SCRIPTS_DIR:-$(dirname "$0")}/stamps.sh"
    name="$(stamps "$BACKUP_DIR" .dump | tail -n 1)"
    if [ -z "$name" ]; then
      echo "restore: no dump in $BACKUP_DIR" >&2
      exit 1
    fi
    dump="$BACKUP_DIR/$name" ;;
  */*) dump="$RESTORE_FROM" ;;
  *) dump="${BACKUP_DIR:?BACKUP_DIR is required for a bare file name}/$RESTORE_FROM" ;;
esac

for f in "$dump" "$dump.sha256"; do
  if [ ! -f "$f" ]; then
    echo "restore: $f does not exist" >&2
    exit 1
  fi
done
# Compare the sums, not `sha256sum -c`: that would check the file name written
# in the .sha256, which is wrong for a dump copied under another name.
want="$(cut -d' ' -f1 < "$dump.sha256")"
have="$(sha256sum < "$dump" | cut -d' ' -f1)"
if [ -z "$want" ] || [ "$want" != "$have" ]; then
  echo "restore: checksum mismatch for $dump (want '$want', have '$have'); not restoring" >&2
  exit 1
fi

echo "restore: $dump into $PGDATABASE on $PGHOST"
pg_restore --exit-on-error --single-transaction -d "$PGDATABASE" "$dump"
if [ -n "${RESTORE_MARKER:-}" ]; then
  printf '%s\nsha256 %s\n' "${dump##*/}" "$have" > "$RESTORE_MARKER"
fi
echo "restore: done"
