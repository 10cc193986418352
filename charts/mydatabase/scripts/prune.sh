#!/bin/sh
# Deletes dumps (and their .sha256) and base backups older than
# BACKUP_RETENTION (<n>h, <n>d or <n>w), then the archived WAL that no base
# backup left needs: everything before the oldest one's first segment. The
# newest dump and the newest base backup are always kept, however old, so a
# failing backup job can never prune the last good backup away; so is the
# newest base backup older than the retention, which any moment of the
# retention's first hours recovers from. Age comes from
# the UTC timestamp in the name, not mtime, which copies and restores change.
#
#   BACKUP_DIR, BACKUP_RETENTION
#   ARCHIVE_DIR   the continuous archive (default BACKUP_DIR/wal)
#   NOW   seconds since the epoch to prune against (default: now; for tests)
set -eu
. "${SCRIPTS_DIR:-$(dirname "$0")}/stamps.sh"

: "${BACKUP_DIR:?BACKUP_DIR is required}"
: "${BACKUP_RETENTION:?BACKUP_RETENTION is required}"

# The CRD's pattern for spec.backup.retention, as text (tests/chart/test_one_source.py holds it there): a
# malformed retention is an error, never "delete everything".
RETENTION_PATTERN='^[1-9][0-9]*[hdw]$'
case "$BACKUP_RETENTION" in
  *'
'*) valid= ;;  # grep judges each line alone: one line only
  *) valid="$(printf '%s\n' "$BACKUP_RETENTION" | grep -E -e "$RETENTION_PATTERN" || true)" ;;
esac
if [ -z "$valid" ]; then
  echo "prune: BACKUP_RETENTION=$BACKUP_RETENTION is not <n>h, <n>d or <n>w (n above zero)" >&2
  exit 1
fi
count="${BACKUP_RETENTION%[hdw]}"
case "$BACKUP_RETENTION" in
  *h) unit=3600 ;;
  *d) unit=86400 ;;
  *w) unit=604800 ;;
esac
cutoff=$(( ${NOW:-$(date -u +%s)} - count * unit ))

# Seconds since the epoch of a YYYYmmddTHHMMSSZ stamp, in shell arithmetic
# (date -d is not portable). Days from civil date: H. Hinnant's algorithm.
# "1$x - 100" strips leading zeros, which sh would read as octal.
epoch() {
  y=${1%????????????}; rest=${1#????}
  m=$((1${rest%??????????} - 100)); rest=${rest#??}
  d=$((1${rest%????????} - 100)); rest=${rest#???}
  H=$((1${rest%?????} - 100)); rest=${rest#??}
  M=$((1${rest%???} - 100)); rest=${rest#??}
  S=$((1${rest%?} - 100))
  [ "$m" -le 2 ] && y=$((y - 1))
  era=$((y / 400)); yoe=$((y - era * 400))
  doy=$(( (153 * ((m + 9) % 12) + 2) / 5 + d - 1 ))
  doe=$(( yoe * 365 + yoe / 4 - yoe / 100 + doy ))
  echo $(( (era * 146097 + doe - 719468) * 86400 + H * 3600 + M * 60 + S ))
}

# Only names this job writes are considered; anything else is left alone.
# Stamps sort lexically in time order, so the last one is the newest.
dumps="$(stamps "$BACKUP_DIR" .dump)"
newest="$(printf '%s\n' "$dumps" | tail -n 1)"

for name in $dumps; do
  [ "$name" = "$newest" ] && continue
  if [ "$(epoch "${name%.dump}")" -lt "$cutoff" ]; then
    rm -f "$BACKUP_DIR/$name" "$BACKUP_DIR/$name.sha256"
    echo "prune: removed $name"
  fi
done

# Base backups (base-backup.sh): the same rule, but the newest one taken before the cutoff stays too: a
# recovery to a moment early in the window starts from it (the window reaches back the whole retention).
# Hidden .partial ones never match.
base="$BACKUP_DIR/base"
[ -d "$base" ] || exit 0
backups="$(stamps "$base")"
newest="$(printf '%s\n' "$backups" | tail -n 1)"
anchor=""
for name in $backups; do
  if [ "$(epoch "$name")" -lt "$cutoff" ]; then anchor="$name"; fi
done
for name in $backups; do
  [ "$name" = "$newest" ] && continue
  [ "$name" = "$anchor" ] && continue
  if [ "$(epoch "$name")" -lt "$cutoff" ]; then
    rm -rf "${base:?}/$name"
    echo "prune: removed base backup $name"
  fi
done

# The WAL: a recovery from the oldest base backup kept reads from its start_wal on; older segments
# (of every timeline, .partial ones included) serve no recovery any more. History files stay.
oldest="$(stamps "$base" | head -n 1)"
archive="${ARCHIVE_DIR:-$BACKUP_DIR/wal}"
if [ -n "$oldest" ] && [ -d "$archive" ]; then
  start_wal="$(sed -n 's/^start_wal=//p' "$base/$oldest/info")"
  if [ -z "$start_wal" ]; then
    echo "prune: $base/$oldest/info names no start_wal; the archive is left as it is" >&2
    exit 1
  fi
  pg_archivecleanup "$archive" "$start_wal"
  echo "prune: the archive starts at $start_wal (base backup $oldest)"
fi
