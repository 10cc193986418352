#!/bin/sh
# Proves the newest base backup and the archive after it can be recovered:
# pg_verifybackup checks every file of the base backup against its manifest,
# then recover.sh recovers it with the archived WAL to the archive's end into
# a scratch directory, a query must answer there, and (data checksums on)
# pg_checksums reads every page of the stopped copy: a page damaged on the
# primary's disk before the backup copied it (the manifest then matches the
# damage) fails here, named by relation and block. Nothing of the database
# or of the backup volume changes; the scratch copy is deleted.
#
#   BACKUP_DIR       the backup volume (base/, wal/), read only
#   VERIFY_DIR       an empty scratch directory with room for a copy
#   PGPORT, CREDENTIALS_DIR, SCRIPTS_DIR  as recover.sh needs them
#
# The last line says what was proved, or why not; the exit code is 0 only
# when the recovered copy answered.
set -eu

: "${BACKUP_DIR:?BACKUP_DIR is required}"
: "${VERIFY_DIR:?VERIFY_DIR is required}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"
. "$SCRIPTS_DIR/stamps.sh"
base="$BACKUP_DIR/base"
newest="$(stamps "$base" | tail -n 1)"
if [ -z "$newest" ]; then
  echo "verify: failed: no base backup in $base" >&2
  exit 1
fi
copy="$VERIFY_DIR/pgdata"
trap 'rm -rf "$copy"' EXIT

pg_verifybackup --quiet "$base/$newest/data" || {
  echo "verify: failed: base backup $newest does not match its manifest" >&2
  exit 1
}
RECOVER_INTO="$copy" RESTORE_DIR="$BACKUP_DIR" sh "$SCRIPTS_DIR/recover.sh" || {
  echo "verify: failed: base backup $newest and the archive after it did not recover" >&2
  exit 1
}

# The recovered copy must start and answer, as a restore would serve it.
work="$(mktemp -d)"
printf 'local all all trust\n' > "$work/pg_hba.conf"
trap 'pg_ctl -D "$copy" -m immediate -w stop >/dev/null 2>&1 || true; rm -rf "$copy" "$work"' EXIT
pg_ctl -D "$copy" -w -l "$work/server.log" -o "-c listen_addresses='' -c unix_socket_directories='$work' \
  -p ${PGPORT:-5432} -c hba_file='$work/pg_hba.conf' -c synchronous_standby_names=''" start >/dev/null || {
  cat "$work/server.log" >&2
  echo "verify: failed: the recovered copy of $newest does not start" >&2
  exit 1
}
sql() {  # DATABASE SQL: one value from the recovered copy
  psql -h "$work" -p "${PGPORT:-5432}" -U "$(credential username)" -d "$1" -XAtq -c "$2"
}
tables="$(sql postgres "select count(*) from pg_class where relkind = 'r'")" || {
  echo "verify: failed: the recovered copy of $newest does not answer" >&2
  exit 1
}
if [ "$(sql postgres "show data_checksums")" != "on" ]; then
  echo "verify: ok: base backup $newest and the archive after it recover to a server that answers ($tables tables; no data checksums: pages not checked)"
  exit 0
fi

# Every page, on the copy stopped cleanly (pg_checksums reads a stopped cluster only).
pg_ctl -D "$copy" -m fast -w stop >/dev/null
if pg_checksums --check -D "$copy" > "$work/checksums.out" 2>&1; then
  pages="$(sed -n 's/^Blocks scanned: *//p' "$work/checksums.out")"
  echo "verify: ok: base backup $newest and the archive after it recover to a server that answers ($tables tables; $pages pages, every checksum right)"
  exit 0
fi
# pg_checksums names files and blocks (in file "<copy>/base/<db oid>/<filenode>[_fork][.segment]", block N);
# the copy, started again, names their relations.
damaged="$(sed -n 's|.*checksum verification failed in file "[^"]*/base/\([0-9]*\)/\([0-9]*\)[^"]*", block \([0-9]*\).*|\1 \2 \3|p' \
  "$work/checksums.out" | head -n 5)"
if [ -z "$damaged" ]; then
  echo "verify: failed: pg_checksums on the recovered copy of $newest: $(grep -v '^$' "$work/checksums.out" | tail -n 1)" >&2
  exit 1
fi
pg_ctl -D "$copy" -w -l "$work/server.log" -o "-c listen_addresses='' -c unix_socket_directories='$work' \
  -p ${PGPORT:-5432} -c hba_file='$work/pg_hba.conf' -c synchronous_standby_names=''" start >/dev/null
named="$(printf '%s\n' "$damaged" | while read -r database filenode block; do
  datname="$(sql postgres "select datname from pg_database where oid = $database")"
  relation="$(sql "$datname" "select coalesce(pg_filenode_relation(0, $filenode)::text, 'filenode $filenode')")"
  printf 'relation %s (database %s) block %s; ' "$relation" "$datname" "$block"
done)"
bad="$(sed -n 's/^Bad checksums: *//p' "$work/checksums.out")"
echo "verify: failed: base backup $newest holds ${bad:-some} damaged pages (data checksums wrong): ${named%; }" >&2
exit 1
