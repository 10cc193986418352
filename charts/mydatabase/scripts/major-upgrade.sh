#!/bin/sh
# Upgrades the cluster in PGDATA, stopped cleanly on an older major, to this
# image's major with pg_upgrade --link: the upgrade Job's container, on the
# primary's volume, with the old major's programs in OLD_ROOT (old-binaries.sh).
#
#   PGDATA, OLD_ROOT, CREDENTIALS_DIR (credentials.sh), SCRIPTS_DIR
#   MIN_FREE_MB  the free space the volume must have beside the data (default
#                256): the new cluster's catalogs and pg_upgrade's files;
#                --link shares the data files themselves
#
# Steps, each one safe to run again after a kill (the Job retries):
#   1. a swap cut short is finished; an upgrade cut short is undone (the old
#      cluster's pg_control back in place, the side directory removed);
#   2. initdb of the new major in PGDATA.upgrade (same volume: hard links),
#      with the old cluster's superuser, encoding and authentication files;
#   3. pg_upgrade --check: any refusal stops here, with PGDATA untouched;
#   4. pg_upgrade --link, then the swap: PGDATA.upgrade becomes PGDATA, the
#      old directory is removed (its files are the new one's, linked).
# Until step 4's swap, the old cluster starts as it was: a failure anywhere
# leaves it to serve again on the old major.
set -eu

: "${PGDATA:?PGDATA is required}"
: "${OLD_ROOT:?OLD_ROOT is required}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"

new_major="$(postgres -V | sed -n 's/^[^0-9]*\([0-9][0-9]*\).*/\1/p')"
new="$PGDATA.upgrade"
done_marker="$new/.upgraded"

# 1. What a kill left behind.
if [ ! -d "$PGDATA" ] && [ -f "$done_marker" ]; then
  mv "$new" "$PGDATA"
fi
old_major="$(cat "$PGDATA/PG_VERSION")"
if [ "$old_major" = "$new_major" ]; then
  rm -rf "$PGDATA.old" "$new" "$PGDATA/.upgraded" "$PGDATA/pg_upgrade_output.d"
  echo "major-upgrade: $PGDATA is at PostgreSQL $new_major"
  exit 0
fi
if [ -f "$PGDATA/global/pg_control.old" ] && [ ! -f "$PGDATA/global/pg_control" ]; then
  # pg_upgrade --link renames it before linking; linking leaves the old files as they were.
  mv "$PGDATA/global/pg_control.old" "$PGDATA/global/pg_control"
  echo "major-upgrade: an upgrade cut short was undone"
fi
rm -rf "$new"

fail_early() {  # why, before anything was made: the data is untouched
  echo "major-upgrade: $1; the data is untouched" >&2
  [ -w /dev/termination-log ] && echo "major-upgrade: $1; the data is untouched" > /dev/termination-log
  exit 1
}
free_mb="$(df -Pk "$(dirname "$PGDATA")" | awk 'NR == 2 { print int($4 / 1024) }')"
if [ "$free_mb" -lt "${MIN_FREE_MB:-256}" ]; then
  fail_early "the volume has ${free_mb} MB free and the upgrade needs ${MIN_FREE_MB:-256} MB beside the data: grow spec.storage first"
fi

old_bin="$OLD_ROOT/usr/lib/postgresql/$old_major/bin"
if [ ! -x "$old_bin/postgres" ]; then
  fail_early "$PGDATA is PostgreSQL $old_major, but $OLD_ROOT has no PostgreSQL $old_major (old-binaries.sh of that major's image)"
fi
# The old programs get the libraries the new image lacks, and only those.
libs="$(mktemp -d)"
for library in "$OLD_ROOT/deps"/*; do
  [ -e "$library" ] || continue
  ldconfig -p | grep -q "^[[:space:]]*$(basename "$library") " || ln -s "$library" "$libs/"
done
export LD_LIBRARY_PATH="$libs"

work="$(mktemp -d)"
superuser="$(credential username)"
password="$(credential password)"
printf '%s\n' "$password" > "$work/pwfile"
write_passfile "$work/pgpass" "$superuser" "$password"
export PGPASSFILE="$work/pgpass"
cd "$work"   # pg_upgrade writes its logs where it runs, and wants it writable
upgrade() {  # pg_upgrade's own report of each step is kept for failed()
  pg_upgrade --old-bindir="$old_bin" --new-bindir="$(dirname "$(command -v postgres)")" \
    --old-datadir="$PGDATA" --new-datadir="$new" --username="$superuser" --socketdir="$work" "$@" \
    > "$work/pg_upgrade.out" 2>&1 && cat "$work/pg_upgrade.out" && return 0
  cat "$work/pg_upgrade.out"
  return 1
}
failed() {  # STEP: why in one line, last: the first sentence of pg_upgrade's reason, and the objects it lists
  why="$(sed -n '/fatal$\|failed check:/,/^Failure, exiting/p' "$work/pg_upgrade.out" | sed '1d' \
    | grep -v ':[[:space:]]*$\|^Failure, exiting\|^ *[/.]' | tr -s ' \n' '  ' | sed 's/^ *//; s/\. .*/./' | cut -c1-200)"
  listed="$(find "$new" -path '*pg_upgrade_output.d*' -name '*.txt' -exec cat {} + 2>/dev/null | tr -s ' \n' '  ')"
  [ -z "$listed" ] || why="$why ($(printf '%s' "$listed" | sed 's/^ *//; s/ *$//' | cut -c1-100))"
  rm -rf "$new"
  message="major-upgrade: $1 failed: ${why:-see the log above}; the data is untouched"
  echo "$message" >&2
  [ -w /dev/termination-log ] && echo "$message" > /dev/termination-log
  exit 1
}

# The new cluster first: --check needs one to check against, and changes neither.
initdb -D "$new" -U "$superuser" --pwfile="$work/pwfile" --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
  --encoding=UTF8 >/dev/null
cp "$PGDATA/pg_hba.conf" "$PGDATA/pg_ident.conf" "$new/"
upgrade --check || failed "pg_upgrade --check from PostgreSQL $old_major to $new_major"
echo "major-upgrade: pg_upgrade --check passed; upgrading PostgreSQL $old_major to $new_major"
upgrade --link || failed "pg_upgrade --link from PostgreSQL $old_major to $new_major"

# The settings that are the cluster's, not the chart's: ALTER SYSTEM's, and the include of chart.conf.
cp "$PGDATA/postgresql.auto.conf" "$new/postgresql.auto.conf"
grep -xF "include_if_exists = 'chart.conf'" "$PGDATA/postgresql.conf" >> "$new/postgresql.conf" || true
echo "$old_major" > "$done_marker"
mv "$PGDATA" "$PGDATA.old"
mv "$new" "$PGDATA"
rm -rf "$PGDATA.old" "$PGDATA/.upgraded" "$PGDATA/pg_upgrade_output.d" "$work" "$libs"
echo "major-upgrade: $PGDATA upgraded from PostgreSQL $old_major to $new_major"
