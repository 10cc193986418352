#!/bin/sh
# The continuous archive: streams the primary's WAL into ARCHIVE_DIR as it is
# written (pg_receivewal --synchronous: each piece is on the archive's disk
# before the primary hears it was received), for ever. The container command
# of the database's archive pod, the one pod that writes ARCHIVE_DIR.
#
#   PGHOST, PGPORT   the read-write Service: after a failover or a switchover
#                    it leads to the new primary, and the archive follows it
#                    onto its new timeline (pg_receivewal fetches the history
#                    file and goes on from the switch; see below when the
#                    archive was ahead of the new primary)
#   CREDENTIALS_DIR  the replication user's name and password (credentials.sh)
#   BACKUP_DIR       the backup volume (default: ARCHIVE_DIR's parent); an
#                    older major's base backups and WAL there are moved aside
#                    first (archive-major.sh)
#   ARCHIVE_DIR      where the WAL goes: complete segments under their own
#                    names, the one being written as <segment>.partial
#   ARCHIVE_SLOT     the replication slot (default mydb_archive): while the
#                    archive is behind, the primary keeps the WAL it has not
#                    got (max_slot_wal_keep_size bounds how much)
#   RETRY_SECONDS    wait before reconnecting (default 2)
#   STREAMING_FILE   exists while pg_receivewal runs (the readiness probe's
#                    file; default /tmp/streaming)
#
# A slot lives on one server: each connection creates it on whichever server
# is primary now (--if-not-exists), so the archive keeps its place after a
# failover too. Replicas drop a slot they inherited (entrypoint.sh).
#
# Replication is asynchronous: the archive may have streamed more of the old
# primary's WAL than the replica promoted in its place had received. The new
# timeline forked before the archive's end, the new primary refuses the old
# timeline past the fork, and pg_receivewal, which goes on from the newest
# file, would be refused for ever. Before each start the archive asks the
# server for its timeline's history; in that case the old timeline's files
# from the fork's segment on, the only copy of the commits the failover lost,
# are moved to diverged-wal/<UTC time>-tl<old timeline>/ beside ARCHIVE_DIR,
# with mydb-kept.txt saying what they are (nothing in the chart removes them),
# and pg_receivewal goes on from the fork, onto the new timeline.
set -eu

: "${PGHOST:?PGHOST is required}"
: "${ARCHIVE_DIR:?ARCHIVE_DIR is required}"
. "${SCRIPTS_DIR:-$(dirname "$0")}/credentials.sh"
. "${SCRIPTS_DIR:-$(dirname "$0")}/archive-major.sh"
slot="${ARCHIVE_SLOT:-mydb_archive}"
STREAMING_FILE="${STREAMING_FILE:-/tmp/streaming}"
rm -f "$STREAMING_FILE"
private="$(mktemp -d)"
trap 'rm -rf "$private"' EXIT
PGUSER="$(credential replication-username)"
replication_password="$(credential replication-password)"
write_passfile "$private/pgpass" "$PGUSER" "$replication_password"
export PGUSER PGPASSFILE="$private/pgpass"
settle_major "${BACKUP_DIR:-$(dirname "$ARCHIVE_DIR")}"
mkdir -p "$ARCHIVE_DIR"

# application_name: how the operator finds the archive in pg_stat_replication (and synchronous
# replication never counts it as a replica). Keepalives end a connection to a primary that vanished.
options="connect_timeout=5 tcp_user_timeout=10000 keepalives_idle=10 keepalives_interval=5 keepalives_count=3"
connection="application_name=mydb-archive $options"

# replication_command COMMAND: a replication protocol command's rows (IDENTIFY_SYSTEM, TIMELINE_HISTORY), as
# the replication user may run them; under another application_name, which the operator does not read.
replication_command() {
  psql -d "application_name=mydb-archive-check $options replication=true" -XAtq -v ON_ERROR_STOP=1 \
    --no-password -c "$1"
}

# lsn BYTES: the X/Y form of a WAL position. position LSN: the other way.
lsn() { printf '%X/%X' $(($1 >> 32)) $(($1 & 0xFFFFFFFF)); }
position() { echo $(( (0x${1%/*} << 32) + 0x${1#*/} )); }

# wal_files: the names of ARCHIVE_DIR's WAL segment files, complete and .partial.
wal_files() {
  (cd "$ARCHIVE_DIR" && printf '%s\n' *) | grep -E '^[0-9A-F]{24}(\.partial)?$' || true
}

# keep_diverged: moves the old timeline's WAL past a fork aside (above), when the archive's newest file is
# on a timeline the server's history left before that file's end. Says nothing and moves nothing when it
# cannot tell (no answer, nothing archived): pg_receivewal then goes on as before.
keep_diverged() {
  # The newest file: the highest segment, of the newest timeline among that segment's files.
  newest="$(wal_files | awk '{ print substr($0, 9, 16) substr($0, 1, 8), $0 }' | sort | tail -n 1 | cut -d ' ' -f 2)"
  [ -n "$newest" ] || return 0
  old_hex="$(echo "$newest" | cut -c 1-8)"
  old=$((0x$old_hex))
  system="$(replication_command IDENTIFY_SYSTEM)" || return 0
  current="$(echo "$system" | cut -d '|' -f 2)"
  case "$current" in '' | *[!0-9]*) return 0 ;; esac
  [ "$current" -gt "$old" ] || return 0
  # The history file's lines: parent timeline, where the next one forked off it, why. The first comes
  # after "<name>|" (psql's column separator).
  history="$(replication_command "TIMELINE_HISTORY $current")" || return 0
  fork="$(printf '%s\n' "$history" | sed 's/^[0-9A-F]*\.history|//' \
    | awk -F '\t' -v old="$old" -v current="$current" '
        /^[0-9]/ { if (found) { print $1; found = 0; exit } if ($1 == old) { printf "%s ", $2; found = 1 } }
        END { if (found) print current }')"
  if [ -z "$fork" ]; then
    echo "wal-archive: timeline $old, the archive's newest, is not in timeline $current's history; leaving the archive as it is" >&2
    return 0
  fi
  next="${fork#* }"
  fork="${fork% *}"
  case "$fork" in [0-9A-F]*/[0-9A-F]*) ;; *) return 0 ;; esac
  case "$fork" in */*/* | *[!0-9A-F/]*) return 0 ;; esac

  # Segments are as long as their files (pg_receivewal pads a .partial to the full size).
  size=$(( $(wc -c < "$ARCHIVE_DIR/$newest") ))
  [ "$size" -gt 0 ] || return 0
  fork_at="$(position "$fork")"
  fork_segment=$((fork_at / size))
  # segment NAME: the number of a WAL file's segment.
  segment() { echo $(( 0x$(echo "$1" | cut -c 9-16) * (0x100000000 / size) + 0x$(echo "$1" | cut -c 17-24) )); }
  newest_segment="$(segment "$newest")"
  [ "$newest_segment" -ge "$fork_segment" ] || return 0
  archive_end=""
  case "$newest" in
    *.partial)
      if [ "$newest_segment" -eq "$fork_segment" ]; then
        # The fork's own segment, not complete: ahead only when it holds bytes past the fork (past the end of
        # what was received, a .partial is zeros). A plain switch ends exactly at the fork.
        [ "$(tail -c +$((fork_at % size + 1)) "$ARCHIVE_DIR/$newest" | tr -d '\000' | wc -c)" -gt 0 ] || return 0
      fi
      # The end of its valid WAL, as pg_waldump says where reading stopped (its last position named).
      mkdir -p "$private/waldump"
      ln -sf "$ARCHIVE_DIR/$newest" "$private/waldump/${newest%.partial}"
      archive_end="$(pg_waldump --quiet "$private/waldump/${newest%.partial}" 2>&1 | tr -c '0-9A-F/' '\n' \
        | grep -E '^[0-9A-F]+/[0-9A-F]+$' | tail -n 1 || true)"
      rm -rf "$private/waldump"
      ;;
    *) archive_end="$(lsn $(( (newest_segment + 1) * size )))" ;;
  esac

  files=""
  for name in $(wal_files | sort); do
    if [ "${name%"${name#????????}"}" = "$old_hex" ] && [ "$(segment "$name")" -ge "$fork_segment" ]; then
      files="$files $name"
    fi
  done
  stamp="$(date -u +%Y%m%dT%H%M%SZ)"
  kept="$(dirname "$ARCHIVE_DIR")/diverged-wal/$stamp-tl$old"
  n=1
  while [ -e "$kept" ]; do
    n=$((n + 1))
    kept="$(dirname "$ARCHIVE_DIR")/diverged-wal/$stamp-tl$old-$n"
  done
  mkdir -p "$kept" || return 1
  # What it is first, then the files (renames on the same volume: instant, nothing copied).
  {
    echo "timeline=$old"
    echo "forkLsn=$fork"
    echo "newTimeline=$next"
    echo "firstSegment=$(echo "$files" | awk '{ print $1 }')"
    echo "lastSegment=$(echo "$files" | awk '{ print $NF }')"
    echo "archiveEnd=$archive_end"
    echo "major=$(binary_major)"
    echo "keptAt=$(echo "$stamp" | sed 's/^\(....\)\(..\)\(..\)T\(..\)\(..\)\(..\)Z$/\1-\2-\3T\4:\5:\6Z/')"
  } > "$kept/mydb-kept.txt" || return 1
  for name in $files; do
    mv "$ARCHIVE_DIR/$name" "$kept/$name" || return 1
  done
  echo "wal-archive: the archive had timeline $old to ${archive_end:-past the fork}, past $fork, where timeline $next forked off it (a failover's lost commits): kept its WAL from there ($(echo "$files" | wc -w) files) in $kept, which nothing in the chart removes; streaming timeline $next from the fork"
}

# Kubernetes stops the pod with SIGTERM to this shell, PID 1 of its container, which ignores any signal it
# has no trap for: every deletion, roll and drain of the pod waited out its 30 s grace period. The stream
# runs in the background so that the trap runs at once; SIGINT is pg_receivewal's clean stop, and with
# --synchronous everything it acknowledged is on disk already.
streamer=""
stop() {
  if [ -n "$streamer" ]; then
    kill -INT "$streamer" 2>/dev/null || true
    wait "$streamer" 2>/dev/null || true
  fi
  exit 0
}
trap stop TERM INT

while :; do
  if pg_receivewal -d "$connection" --slot="$slot" --create-slot --if-not-exists --no-password; then
    # After a failover the slot is made just now on the new primary: it holds WAL from the archive's first
    # reply on. The stream starts at the fork's segment at the earliest, the new timeline's first, which
    # the new primary keeps until then unless it wrote more than wal_keep_size meanwhile.
    keep_diverged || echo "wal-archive: could not keep the WAL past a fork aside; see above" >&2
    # --synchronous flushes each write; --no-loop hands a lost connection back here, to make the slot
    # on the server that is primary now before streaming from it again; a reply every 5 s when idle
    # tells the operator the archive is alive (policy/archive.py).
    touch "$STREAMING_FILE"
    pg_receivewal -d "$connection" -D "$ARCHIVE_DIR" --slot="$slot" --synchronous --no-loop \
      --status-interval=5 --no-password &
    streamer=$!
    wait "$streamer" || echo "wal-archive: streaming from $PGHOST stopped; reconnecting" >&2
    streamer=""
    rm -f "$STREAMING_FILE"
  else
    echo "wal-archive: cannot reach a primary at $PGHOST:${PGPORT:-5432} to make slot $slot; retrying" >&2
  fi
  sleep "${RETRY_SECONDS:-2}"
done
