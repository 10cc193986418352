#!/bin/sh
# One base backup, the starting point of a recovery to a moment: pg_basebackup
# of the whole cluster, in plain format with the WAL it needs (so it is
# consistent on its own), into $BACKUP_DIR/base/<UTC YYYYmmddTHHMMSSZ>/:
#
#   data/   the copy, with its backup_manifest (pg_verifybackup checks it)
#   info    what a restore and the retention need, as name=value lines:
#           end_epoch, end_time (the first moment this backup recovers to),
#           start_wal (the first archived segment a recovery from it reads),
#           timeline
#
# Written under a hidden name and renamed last, so a listed backup is always
# complete, as backup.sh does for dumps.
#
#   PGHOST, PGPORT   the read-write Service
#   CREDENTIALS_DIR  the replication user's name and password (credentials.sh)
#   BACKUP_DIR       the backup volume; an older major's base backups and WAL
#                    there are moved aside first (archive-major.sh)
set -eu

: "${PGHOST:?PGHOST is required}"
: "${BACKUP_DIR:?BACKUP_DIR is required}"
. "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
. "${SCRIPTS_DIR:-$(dirname "$0")}/archive-major.sh"
settle_major "$BACKUP_DIR"
private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
PGUSER="$(credential replication-username)"
replication_password="$(credential replication-password)"
write_passfile "$private/pgpass" "$PGUSER" "$replication_password"
export PGUSER PGPASSFILE="$private/pgpass"

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
base="$BACKUP_DIR/base"
mkdir -p "$base"
if [ -e "$base/$stamp" ]; then
  echo "base-backup: $base/$stamp already exists" >&2
  exit 1
fi
# A Job killed half-way never ran its trap; runs are one at a time, so a hidden one left is garbage.
rm -rf "$base"/.*.partial
partial="$base/.$stamp.partial"
# A failed first run leaves no empty base/ behind either.
trap 'rm -rf "$partial" "$private"; rmdir "$base" 2>/dev/null || true' EXIT
mkdir "$partial"

wait_for_server "$PGHOST"
# A faithful copy, damaged pages included (--no-verify-checksums): pg_basebackup's own check would throw the
# whole backup away for one bad page, and every backup after it, while the page waits to be repaired; a
# verification (verify.sh) reads every page of the copy and names the damaged ones.
pg_basebackup -d "application_name=mydb-base-backup connect_timeout=10" --no-password \
  -D "$partial/data" -F plain -X stream -c fast --label="mydb $stamp" --no-verify-checksums
end_epoch="$(date -u +%s)"

# backup_label: "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)" and "START TIMELINE: 1".
start_wal="$(sed -n 's/^START WAL LOCATION: .*(file \([0-9A-F]\{24\}\))$/\1/p' "$partial/data/backup_label")"
timeline="$(sed -n 's/^START TIMELINE: \([0-9]*\)$/\1/p' "$partial/data/backup_label")"
if [ -z "$start_wal" ] || [ -z "$timeline" ]; then
  echo "base-backup: no start WAL or timeline in $partial/data/backup_label" >&2
  exit 1
fi
printf 'end_epoch=%s\nend_time=%s\nstart_wal=%s\ntimeline=%s\n' \
  "$end_epoch" "$(date -u -d "@$end_epoch" +%Y-%m-%dT%H:%M:%SZ)" "$start_wal" "$timeline" > "$partial/info"
mv "$partial" "$base/$stamp"
echo "base-backup: wrote $base/$stamp (from $PGHOST, timeline $timeline, WAL from $start_wal)"
