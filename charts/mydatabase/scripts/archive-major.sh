# shellcheck shell=sh
# Sourced by wal-archive.sh, base-backup.sh, recover.sh and primary-init.sh
# (not run on its own). The base backups (base/) and the WAL (wal/) of a
# backup volume belong to one PostgreSQL major: a base backup of one major
# never replays another's WAL. BACKUP_DIR/PG_MAJOR says which.
#
# After a major upgrade in place, the first of the new major's archive pod or
# base backup to start moves the old major's base/ and wal/ into
# BACKUP_DIR/postgresql-<old major>/: kept and labelled, never mixed with the
# new major's, and still what a new database of the old major recovers from
# (recover.sh picks it). Dumps stay where they are: they are logical.

# binary_major: the major of this image's PostgreSQL.
binary_major() {
  pg_basebackup --version | sed -n 's/^[^0-9]*\([0-9][0-9]*\).*/\1/p'
}

. "${SCRIPTS_DIR:-$(dirname "$0")}/stamps.sh"

# archive_major DIR: the major whose base backups and WAL DIR holds; empty
# when DIR says nothing (a new volume). A volume from before PG_MAJOR existed
# is read from its newest base backup.
archive_major() {
  if [ -s "$1/PG_MAJOR" ]; then
    cat "$1/PG_MAJOR"
    return 0
  fi
  newest="$(stamps "$1/base" | tail -n 1)"
  if [ -n "$newest" ]; then
    cat "$1/base/$newest/data/PG_VERSION"
  fi
}

# settle_major DIR: afterwards DIR's base/ and wal/ are this image's major's
# (an older major's moved aside, as above) and DIR/PG_MAJOR says so. The
# archive pod and a backup Job may both start it at once: whichever moves a
# part first wins, the other finds it gone.
settle_major() {
  mine="$(binary_major)"
  theirs="$(archive_major "$1")"
  if [ -n "$theirs" ] && [ "$theirs" != "$mine" ]; then
    kept="$1/postgresql-$theirs"
    mkdir -p "$kept"
    for part in base wal; do
      [ -e "$1/$part" ] || continue
      if [ -e "$kept/$part" ]; then
        echo "archive-major: $kept/$part exists already; $1/$part (PostgreSQL $theirs) is left for a person to sort out" >&2
        return 1
      fi
      mv "$1/$part" "$kept/$part" 2>/dev/null || [ -e "$kept/$part" ]
    done
    echo "$theirs" > "$kept/PG_MAJOR"
    echo "archive-major: PostgreSQL $theirs's base backups and WAL are kept in $kept; this archive is PostgreSQL $mine's from now on"
  fi
  echo "$mine" > "$1/PG_MAJOR.new"
  mv "$1/PG_MAJOR.new" "$1/PG_MAJOR"
}

# recovery_dir DIR: where a server of this image's major recovers from in DIR:
# DIR itself, or the postgresql-<major> folder an upgrade kept there.
recovery_dir() {
  mine="$(binary_major)"
  theirs="$(archive_major "$1")"
  if [ -n "$theirs" ] && [ "$theirs" != "$mine" ] && [ -d "$1/postgresql-$mine" ]; then
    echo "$1/postgresql-$mine"
  else
    echo "$1"
  fi
}
