#!/bin/sh
# Run from the OLD major's image, before a major upgrade (the upgrade Job's
# init container): copies this image's PostgreSQL server, its share files and
# the libraries they load into OLD_ROOT (a volume the upgrade container, from
# the new image, mounts too), so pg_upgrade there can start the old server.
#
#   OLD_ROOT   where to copy (an emptyDir), e.g. /old
#
# Laid out as in the image (usr/lib/postgresql/<major>, usr/share/postgresql/
# <major>): PostgreSQL finds its share and lib folders relative to its bin
# folder. The libraries go to OLD_ROOT/deps; major-upgrade.sh uses only
# those the new image lacks (another Debian suite may have other sonames), so
# none of them shadows one of the new image's. glibc stays the new image's:
# it runs programs built against an older one.
set -eu

: "${OLD_ROOT:?OLD_ROOT is required}"
major="${PG_MAJOR:?PG_MAJOR is required (the image sets it)}"
mkdir -p "$OLD_ROOT/usr/lib/postgresql" "$OLD_ROOT/usr/share/postgresql" "$OLD_ROOT/deps"
cp -a "/usr/lib/postgresql/$major" "$OLD_ROOT/usr/lib/postgresql/"
cp -a "/usr/share/postgresql/$major" "$OLD_ROOT/usr/share/postgresql/"
for program in "/usr/lib/postgresql/$major/bin"/* "/usr/lib/postgresql/$major/lib"/*.so; do
  ldd "$program" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r library; do
  case "$(basename "$library")" in
    libc.so.* | libm.so.* | ld-linux* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.*) ;;
    *) cp -L "$library" "$OLD_ROOT/deps/" ;;
  esac
done
echo "old-binaries: PostgreSQL $major copied into $OLD_ROOT ($(find "$OLD_ROOT/deps" -mindepth 1 -maxdepth 1 | wc -l) libraries)"
