#!/bin/sh
# Recovery from another database's continuous archive, into a new data
# directory: the newest base backup that ends before the target, then its
# archived WAL replayed up to the target (or to the archive's end), then
# promoted to a timeline of its own. Run by primary-init.sh on a new
# database's first boot; the caller renames RECOVER_INTO into place.
#
#   RECOVER_INTO        an absent or empty directory to build the cluster in
#   RESTORE_DIR         the source database's backup volume (base/, wal/; or
#                       postgresql-<this major>/ when the source was upgraded
#                       since, archive-major.sh)
#   RESTORE_TARGET_TIME optional RFC 3339 moment; without it, the archive's end
#   PGPORT, CREDENTIALS_DIR, SCRIPTS_DIR
#
# The recovery runs on a private server (a unix socket in a private folder, no
# TCP). The copy keeps the source's roles; the superuser's and the replication
# user's passwords become this database's (the replication role is made when
# missing),
# through a trust rule that exists only for that private server. A failure
# exits non-zero and says why; the caller throws RECOVER_INTO away.
set -eu

: "${RECOVER_INTO:?RECOVER_INTO is required}"
: "${RESTORE_DIR:?RESTORE_DIR is required}"
PGPORT="${PGPORT:-5432}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
. "$SCRIPTS_DIR/credentials.sh"
. "$SCRIPTS_DIR/archive-major.sh"
RESTORE_DIR="$(recovery_dir "$RESTORE_DIR")"
mine="$(binary_major)"
theirs="$(archive_major "$RESTORE_DIR")"
if [ -n "$theirs" ] && [ "$theirs" != "$mine" ]; then
  echo "recover: the archive in $RESTORE_DIR is PostgreSQL $theirs's and this is PostgreSQL $mine: recover into a database at $theirs (and upgrade it in place)" >&2
  exit 1
fi
base="$RESTORE_DIR/base"
archive="$RESTORE_DIR/wal"
target="${RESTORE_TARGET_TIME:-}"

backups="$(stamps "$base")"
if [ -z "$backups" ]; then
  echo "recover: no base backup in $base" >&2
  exit 1
fi
info() { sed -n "s/^$2=//p" "$base/$1/info"; }
first_point="$(info "$(printf '%s\n' "$backups" | head -n 1)" end_time)"
# shellcheck disable=SC2012 # WAL names are hex digits; ls -t is POSIX sh's one way to take the newest file
archive_end="$(ls -t "$archive" 2>/dev/null | head -n 1)"
archive_end="$( [ -n "$archive_end" ] && date -u -r "$archive/$archive_end" +%Y-%m-%dT%H:%M:%SZ || echo unknown)"
window="the archive recovers from $first_point to about $archive_end"

chosen=""
if [ -n "$target" ]; then
  # GNU date reads RFC 3339 (the image is Debian's); the CRD has checked the format already.
  target_epoch="$(date -u -d "$target" +%s)" || { echo "recover: $target is not a time" >&2; exit 1; }
  for name in $backups; do
    [ "$(info "$name" end_epoch)" -le "$target_epoch" ] && chosen="$name"
  done
  if [ -z "$chosen" ]; then
    echo "recover: pointInTime $target is before the first recoverable point; $window" >&2
    exit 1
  fi
else
  chosen="$(printf '%s\n' "$backups" | tail -n 1)"
fi
echo "recover: base backup $chosen, then the archived WAL to ${target:-its end}"

if [ -d "$RECOVER_INTO" ] && [ -n "$(ls -A "$RECOVER_INTO")" ]; then
  echo "recover: $RECOVER_INTO is not empty" >&2
  exit 1
fi
mkdir -p "$RECOVER_INTO"
chmod 700 "$RECOVER_INTO"
cp -R "$base/$chosen/data/." "$RECOVER_INTO/"
touch "$RECOVER_INTO/recovery.signal"

work="$(mktemp -d)"
printf 'local all all trust\n' > "$work/pg_hba.conf"
stop_private() { pg_ctl -D "$RECOVER_INTO" -m immediate -w stop >/dev/null 2>&1 || true; }
trap 'stop_private; rm -rf "$work"' EXIT

# Every setting on the command line: nothing of the recovery stays in the data directory.
# synchronous_standby_names off: the source's could make the password change below wait for ever.
settings="-c listen_addresses='' -c unix_socket_directories='$work' -p $PGPORT -c hba_file='$work/pg_hba.conf'"
settings="$settings -c synchronous_standby_names='' -c recovery_target_timeline=latest"
settings="$settings -c recovery_target_action=promote"
settings="$settings -c restore_command='sh $SCRIPTS_DIR/wal-restore.sh $archive %f %p'"
# In numbers: at start-up the server knows no time zone names, Z included.
[ -z "$target" ] || settings="$settings -c recovery_target_time='$(date -u -d "$target" '+%Y-%m-%d %H:%M:%S.%6N+00')'"
superuser="$(credential username)"
failed() {
  grep -E 'FATAL|PANIC' "$work/recovery.log" >&2 || tail -n 20 "$work/recovery.log" >&2
  if grep -q 'recovery ended before configured recovery target was reached' "$work/recovery.log"; then
    echo "recover: pointInTime $target is after the end of the archive; $window" >&2
  fi
  exit 1
}
# pg_ctl waits until the server accepts connections (consistent, still recovering) or gives up; no time
# limit of its own worth having: replaying a long archive takes as long as it takes (no probe watches the
# init container).
pg_ctl -D "$RECOVER_INTO" -w -t 2000000 -l "$work/recovery.log" -o "$settings" start >/dev/null || failed
in_recovery() {
  psql -h "$work" -p "$PGPORT" -U "$superuser" -d postgres -XAtq -c 'select pg_is_in_recovery()' 2>"$work/psql.err"
}
until [ "$(in_recovery)" = f ]; do
  if grep -q 'role ".*" does not exist' "$work/psql.err"; then
    echo "recover: the source has no role $superuser: restore with the source's superuser name" >&2
    exit 1
  fi
  pg_ctl -D "$RECOVER_INTO" status >/dev/null 2>&1 || failed
  sleep 1
done

password="$(credential password)"
replication_user="$(credential replication-username)"
replication_password="$(credential replication-password)"
psql -h "$work" -p "$PGPORT" -U "$superuser" -d postgres -v ON_ERROR_STOP=1 -XAtq <<SQL
\\set superuser '$(psql_quoted "$superuser")'
\\set password '$(psql_quoted "$password")'
\\set repl_user '$(psql_quoted "$replication_user")'
\\set repl_password '$(psql_quoted "$replication_password")'
ALTER ROLE :"superuser" WITH PASSWORD :'password';
SELECT format('CREATE ROLE %I', :'repl_user') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'repl_user')
\\gexec
ALTER ROLE :"repl_user" WITH REPLICATION LOGIN PASSWORD :'repl_password';
CHECKPOINT;
SQL
pg_ctl -D "$RECOVER_INTO" -m fast -w stop >/dev/null
trap 'rm -rf "$work"' EXIT
grep -E 'recovery stopping|last completed transaction' "$work/recovery.log" || true
echo "recover: recovered $RECOVER_INTO from base backup $chosen${target:+ to $target}"
