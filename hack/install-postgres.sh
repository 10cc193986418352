#!/usr/bin/env bash
# Installs PostgreSQL 15 (Debian's postgresql-15, or the distribution's
# default `postgresql`) for tests/postgres, and IO::Socket::SSL
# (libio-socket-ssl-perl, as in the database image: the chart's lease.pl
# speaks HTTPS), only when missing; a second run does nothing. The tests start their own servers on temporary
# directories and loopback ports; the packaged cluster is not needed.
#
#   hack/install-postgres.sh          (root, or sudo available)
set -euo pipefail
BIN="${MYDB_PG_BIN:-/usr/lib/postgresql/15/bin}"

if [[ -x "${BIN}/initdb" && -x "${BIN}/postgres" && -x "${BIN}/pg_basebackup" ]] \
  && perl -MIO::Socket::SSL -e 1 2>/dev/null; then
  echo "postgresql: present in ${BIN}"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null || { echo "postgresql: missing, and not root (no sudo)" >&2; exit 1; }
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
echo "postgresql: installing"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq libio-socket-ssl-perl
"${SUDO[@]}" apt-get install -y -qq postgresql-15 \
  || "${SUDO[@]}" apt-get install -y -qq postgresql
if [[ ! -x "${BIN}/initdb" ]]; then
  echo "postgresql: installed, but ${BIN}/initdb is missing (another major? set MYDB_PG_BIN)" >&2
  exit 1
fi
echo "postgresql: installed in ${BIN}"
