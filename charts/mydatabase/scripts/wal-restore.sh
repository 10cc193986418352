#!/bin/sh
# restore_command of a recovery from the continuous archive:
#   wal-restore.sh ARCHIVE_DIR %f %p
# copies the archived file %f to %p. The segment the archive was writing when
# it stopped exists only as %f.partial; PostgreSQL asks for it by its full
# name, and gets the partial copy (its end is where the archive ends: the
# recovery stops there). Exit 1 tells PostgreSQL the file does not exist.
set -eu

archive="$1"
file="$2"
target="$3"
if [ -f "$archive/$file" ]; then
  cp "$archive/$file" "$target.copy"
elif [ -f "$archive/$file.partial" ]; then
  cp "$archive/$file.partial" "$target.copy"
else
  exit 1
fi
# Renamed when complete: PostgreSQL must never read half a copy.
mv "$target.copy" "$target"
