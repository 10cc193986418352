#!/bin/sh
# Upgrades the cluster in PGDATA, stopped cleanly on an older major, to this
# image's major with pg_upgrade --link: the upgrade Job's container, on the
# primary's volume, with the old major's programs in OLD_ROOT (old-binaries.sh).
#
#   PGDATA, OLD_ROOT, CREDENTIALS_DIR (credentials.sh), SCRIPTS_DIR
#   MIN_FREE_MB  the free space the volume must have beside the data (the
#                operator's policy/upgrade_facts.py sets it; default 256): the
#                new cluster's catalogs and pg_upgrade's files; --link shares
#                the data files themselves
#
# Steps, each one safe to run again after a kill (the Job retries):
#   1. a swap cut short is finished; an upgrade cut short is undone (below);
#   2. initdb of the new major in PGDATA.upgrade (same volume: hard links),
#      with the old cluster's superuser, encoding and authentication files;
#   3. pg_upgrade --check: any refusal stops here, with PGDATA untouched;
#   4. pg_upgrade --link, then the swap: PGDATA.upgrade becomes PGDATA, the
#      old directory is removed (its files are the new one's, linked).
#
# pg_upgrade --link renames the old cluster's global/pg_control to
# pg_control.old just before it links the data files (the old server will not
# start on it by mistake), then starts the new server once more on the linked
# files. Until that start the old files are as they were: a failure (or a kill)
# puts pg_control back and removes the side directory, and the old cluster
# serves again on the old major. After it, the new server may have written to
# files both clusters share, and the old cluster can no longer be trusted
# (pg_upgrade's own documentation): nothing is put back or removed, and the
# message says so, naming what is kept.
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
say_failed() {  # the Job's last words, on stderr and in its termination message: the operator's status
  echo "$1" >&2
  [ -w /dev/termination-log ] && echo "$1" > /dev/termination-log
  exit 1
}
linked() { [ -f "$PGDATA/global/pg_control.old" ] && [ ! -f "$PGDATA/global/pg_control" ]; }
# The new server starts on the linked files after the rename: postmaster.opts is written at each start,
# and the rename is the last change to the old global/ folder.
new_started_since_link() {
  [ -f "$new/postmaster.opts" ] && [ -n "$(find "$new/postmaster.opts" -newer "$PGDATA/global" 2>/dev/null)" ]
}
untrusted() {  # WHAT failed: the old cluster cannot be put back; everything stays where it is (first: words are cut)
  say_failed "major-upgrade: the old data can no longer be trusted and nothing was removed: $1 after PostgreSQL $new_major had started on the files both clusters share (kept: $PGDATA with global/pg_control.old, and $new)"
}
if linked; then
  if new_started_since_link; then
    untrusted "an upgrade was cut short"
  fi
  mv "$PGDATA/global/pg_control.old" "$PGDATA/global/pg_control"
  echo "major-upgrade: an upgrade cut short was undone"
fi
rm -rf "$new"

fail_early() {  # why, before anything was made: the data is untouched
  say_failed "major-upgrade: $1; the data is untouched"
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
  if [ -z "$why" ]; then  # one of its own steps failed (*failure*): that step, and the last line of the log it names
    step="$(grep -B1 -x '[*]failure[*]' "$work/pg_upgrade.out" | head -n 1 | sed 's/ *$//')"
    log="$(sed -n 's/^Consult the last few lines of "\(.*\)" for$/\1/p' "$work/pg_upgrade.out" | head -n 1)"
    last=""
    if [ -n "$log" ] && [ -f "$log" ]; then last="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-150)"; fi
    why="$step${step:+${last:+: }}$last"
  fi
  restored=""
  if linked; then  # pg_upgrade had begun to link
    new_started_since_link && untrusted "$1 failed (${why:-see the log above})"
    mv "$PGDATA/global/pg_control.old" "$PGDATA/global/pg_control"
    restored=" (its pg_control, renamed for linking, is back)"
  fi
  rm -rf "$new"
  say_failed "major-upgrade: $1 failed: ${why:-see the log above}; the data is untouched$restored"
}

# The new cluster first: --check needs one to check against, and changes neither. Its data checksums as the
# old cluster's (pg_upgrade requires both the same): on for databases made since they became the default.
checksums=""
if "$old_bin/pg_controldata" "$PGDATA" | grep -q '^Data page checksum version: *[1-9]'; then
  checksums="--data-checksums"
fi
initdb -D "$new" -U "$superuser" --pwfile="$work/pwfile" --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
  --encoding=UTF8 $checksums >/dev/null
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
