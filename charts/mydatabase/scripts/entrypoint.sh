#!/bin/sh
# Container command of every database pod. One pod is the primary, every other
# one streams from it; which one is role.sh's answer (the operator's record,
# else ordinal 0). Everything comes from the environment, so this also runs
# outside Kubernetes.
#
#   entrypoint.sh init   the first boot (initdb and restore, or a replica's
#                        clone), or a pod whose data must follow another
#                        primary now (follow.sh: pg_rewind, else a fresh
#                        clone, the data kept aside: below); then exit: the
#                        pod's init container, which no probe limits, so a
#                        clone or a restore may take hours
#   entrypoint.sh serve  the server, on the cluster the first boot made; with
#                        none in PGDATA it exits 1 rather than make one under
#                        the startup probe (an empty primary, or a clone that
#                        probe would cut short); a standby whose history forked
#                        off the primary's (follow.sh) exits 4, untouched,
#                        rather than crash-loop or replay WAL the primary never
#                        had: the init container rewinds it (delete the pod):
#                        the pod's container
#   entrypoint.sh        both, one after the other (outside Kubernetes)
#
# A replica's data that cannot follow the primary (pg_rewind failed) or is of
# another major is never removed: a former primary's may hold the only copy of
# commits the new primary never received. It is moved aside on the volume, to
# diverged-<UTC time> beside PGDATA, with mydb-kept.txt saying what it is, and
# the clone is made only when the volume has room for it beside that; else the
# init container exits 1 saying what to do. Nothing in the chart removes it.
#
#   POD_NAME   <name>-<ordinal>
#   PGDATA     data directory          PGPORT  port (default 5432)
#   SCRIPTS_DIR        where the other scripts and postgresql.conf live
#                      (default: this script's directory)
#   SOCKET_DIR         unix socket directory (default /var/run/postgresql)
#   LISTEN_ADDRESSES   default '*'
#   CREDENTIALS_DIR    the credentials as files (credentials.sh)
#   TLS_DIR            tls.crt, tls.key and ca.crt: the server takes TCP
#                      connections over TLS only, and a replica verifies its
#                      primary's certificate (sslmode=verify-full); unset:
#                      plain TCP
#   PRIMARY_RECORD, PEER_DOMAIN (or PRIMARY_HOST), PRIMARY_PORT (default
#   PGPORT)            the primary, and where a replica streams from (role.sh)
# plus what primary-init.sh / replica-bootstrap.sh need. RESTORE_FROM and
# RESTORE_DIR matter to the primary's first boot only (primary-init.sh restores
# the dump before this script starts the server); replicas ignore them and
# clone the primary, restored data included.
#
# Nothing here ever promotes a server: a recorded primary whose data is a
# standby (the operator's promotion is pending) starts as a standby of nobody,
# and the operator promotes it once the old primary is fenced.
set -eu

: "${POD_NAME:?POD_NAME is required}"
: "${PGDATA:?PGDATA is required}"
PGPORT="${PGPORT:-5432}"
SCRIPTS_DIR="${SCRIPTS_DIR:-$(dirname "$0")}"
SOCKET_DIR="${SOCKET_DIR:-/var/run/postgresql}"
export PGPORT
. "$SCRIPTS_DIR/credentials.sh"

case "${POD_NAME##*-}" in
  '' | *[!0-9]*)
    echo "entrypoint: cannot read an ordinal from POD_NAME=$POD_NAME (want <name>-<N>)" >&2
    exit 1 ;;
esac

mode="${1:-both}"
case "$mode" in
  init | serve | both) ;;
  *) echo "entrypoint: unknown mode '$mode' (want init, serve, or nothing for both)" >&2; exit 1 ;;
esac

. "$SCRIPTS_DIR/role.sh"
# What a connection to another pod adds to its conninfo (follow.sh, replica-bootstrap.sh, the WAL receiver).
PEER_SSL=""
if [ -n "${TLS_DIR:-}" ]; then
  PEER_SSL="sslmode=verify-full sslrootcert=$TLS_DIR/ca.crt"
fi
export PEER_SSL
has_cluster() { [ -s "$PGDATA/PG_VERSION" ]; }
volume="$(dirname "$PGDATA")"

# size_of DIR: its size in bytes (GNU du -b; else du -k, in 1024-byte blocks).
size_of() {
  du -sb "$1" 2>/dev/null | awk '{ print $1 }' | grep . || echo $(( $(du -sk "$1" | awk '{ print $1 }') * 1024 ))
}

# keep_aside REASON DIVERGED_AT: moves PGDATA to diverged-<UTC time> on the
# same volume (a rename: instant, nothing copied), then writes what it is into
# its mydb-kept.txt. The data first: the facts are read from the kept copy.
keep_aside() {
  stamp="$(date -u +%Y%m%dT%H%M%SZ)"
  kept="$volume/diverged-$stamp"
  n=1
  while [ -e "$kept" ]; do
    n=$((n + 1))
    kept="$volume/diverged-$stamp-$n"
  done
  mv "$PGDATA" "$kept"
  # Another major's pg_control may not read right with this one's pg_controldata: no facts then.
  controldata="$(pg_controldata -D "$kept" 2>/dev/null || true)"
  case "$controldata" in *WARNING*) controldata="" ;; esac
  bytes="$(size_of "$kept")"
  {
    echo "reason=$1"
    echo "keptAt=$(echo "$stamp" | sed 's/^\(....\)\(..\)\(..\)T\(..\)\(..\)\(..\)Z$/\1-\2-\3T\4:\5:\6Z/')"
    echo "pod=$POD_NAME"
    echo "primary=$PRIMARY_POD"
    echo "timeline=$(printf '%s\n' "$controldata" | sed -n "s/^Latest checkpoint's TimeLineID: *//p")"
    echo "checkpoint=$(printf '%s\n' "$controldata" | sed -n 's/^Latest checkpoint location: *//p')"
    echo "walEnd=$(cd "$kept/pg_wal" 2>/dev/null && printf '%s\n' * | grep -E '^[0-9A-F]{24}$' | sort | tail -n 1)"
    echo "divergedAt=$2"
    echo "bytes=$bytes"
    echo "major=$(cat "$kept/PG_VERSION" 2>/dev/null || true)"
  } > "$kept/mydb-kept.txt" || echo "entrypoint: could not write $kept/mydb-kept.txt" >&2
  echo "entrypoint: kept $PGDATA as $kept (reason $1, divergedAt ${2:-unknown}, $bytes bytes); nothing in the chart removes it, see its mydb-kept.txt"
}

# A clone beside kept data needs about as much room again: the newest kept
# directory's size and 10 %. Checked at every start without a cluster, as
# PGDATA is gone after a refusal; a clone cut short (replica-bootstrap.sh's
# side directory, thrown away before the next one) counts as free.
check_room() {
  newest=""
  for dir in "$volume"/diverged-*; do
    if [ -d "$dir" ]; then newest="$dir"; fi
  done
  [ -n "$newest" ] || return 0
  bytes="$(sed -n 's/^bytes=//p' "$newest/mydb-kept.txt" 2>/dev/null || true)"
  [ -n "$bytes" ] || bytes="$(size_of "$newest")"
  free=$(( $(df -Pk "$volume" | awk 'NR == 2 { print $4 }') * 1024 ))
  if [ -d "$PGDATA.bootstrap" ]; then
    free=$(( free + $(size_of "$PGDATA.bootstrap") ))
  fi
  need=$(( bytes + bytes / 10 ))
  [ "$free" -lt "$need" ] || return 0
  mb=1048576
  echo "entrypoint: no room to clone $PRIMARY_POD beside the kept $newest ($((bytes / mb)) MB): the volume has $((free / mb)) MB free and the clone needs about $((need / mb)) MB; grow the volume (spec.storage) and this pod clones at its next start, or save what it holds and remove it from a pod that mounts the claim data-$POD_NAME (it is $(basename "$newest") beside $(basename "$PGDATA") there): this pod's containers do not start until the clone is made" >&2
  exit 1
}

if [ "$ROLE" = primary ]; then
  if [ "$RECORDED" = true ]; then
    echo "entrypoint: $POD_NAME is the primary (recorded)"
  else
    echo "entrypoint: $POD_NAME is the primary"
  fi
else
  echo "entrypoint: $POD_NAME is a replica of $PRIMARY_POD"
  REPLICATION_USER="$(credential replication-username)"
  replication_password="$(credential replication-password)"
  # Rewritten on every start, so a changed password takes effect on restart.
  # In the socket directory: a volume of the pod's own, writable, never shared.
  REPLICATION_PASSFILE="$SOCKET_DIR/.replication.pgpass"
  write_passfile "$REPLICATION_PASSFILE" "$REPLICATION_USER" "$replication_password"
  export REPLICATION_USER REPLICATION_PASSFILE PRIMARY_HOST
fi

if [ "$mode" != serve ]; then
  if [ "$ROLE" = primary ]; then
    if [ "$RECORDED" = true ] && ! has_cluster; then
      # The primary moved here once, so this database has data elsewhere: a new
      # empty cluster would be served as if it were it.
      echo "entrypoint: $POD_NAME is the recorded primary but $PGDATA holds no cluster: refusing to make an empty one (the operator fails over to a replica that has the data)" >&2
      exit 1
    fi
    sh "$SCRIPTS_DIR/primary-init.sh"
  else
    if [ -n "${RESTORE_FROM:-}" ]; then
      echo "entrypoint: RESTORE_FROM is for the primary only; cloning it instead"
    fi
    data_major="$(cat "$PGDATA/PG_VERSION" 2>/dev/null || true)"
    server_major="$(postgres -V | sed -n 's/^[^0-9]*\([0-9][0-9]*\).*/\1/p')"
    if [ -n "$data_major" ] && [ "$data_major" != "$server_major" ]; then
      # A major upgrade: the primary's data was upgraded (major-upgrade.sh), a replica's copy is kept and cloned again.
      echo "entrypoint: $PGDATA holds PostgreSQL $data_major data and this is PostgreSQL $server_major: keeping it aside to clone $PRIMARY_POD afresh"
      keep_aside major-mismatch ""
    fi
    if has_cluster; then
      code=0
      diverged_at_file="$(mktemp)"
      REWIND_STANDBY=true DIVERGED_AT_FILE="$diverged_at_file" sh "$SCRIPTS_DIR/follow.sh" || code=$?
      diverged_at="$(cat "$diverged_at_file")"
      rm -f "$diverged_at_file"
      if [ "$code" -eq 3 ]; then
        echo "entrypoint: $PGDATA cannot follow $PRIMARY_POD: keeping it aside to clone $PRIMARY_POD afresh"
        keep_aside rewind-failed "$diverged_at"
      elif [ "$code" -ne 0 ]; then
        exit "$code"
      fi
    fi
    if ! has_cluster; then
      check_room
    fi
    sh "$SCRIPTS_DIR/replica-bootstrap.sh"
  fi
fi
if [ "$mode" = init ]; then
  exit 0
fi
if ! has_cluster; then
  echo "entrypoint: $PGDATA holds no cluster: the first boot (the pod's init container, entrypoint.sh init) makes it; delete the pod to run it again" >&2
  exit 1
fi
if [ "$ROLE" = replica ] && [ ! -f "$PGDATA/standby.signal" ]; then
  # A former primary whose container restarted (its pod was not re-created).
  code=0
  sh "$SCRIPTS_DIR/follow.sh" || code=$?
  if [ "$code" -eq 3 ]; then
    echo "entrypoint: delete the pod: its init container keeps this data aside on the volume and clones $PRIMARY_POD afresh" >&2
  fi
  [ "$code" -eq 0 ] || exit "$code"
elif [ "$ROLE" = replica ] && [ "$mode" = serve ]; then
  # A standby whose container restarted (its pod was not re-created). One that streamed from the old primary
  # past the point where the new primary's timeline forked off would crash-loop on PostgreSQL's FATAL ("requested
  # timeline N does not contain minimum recovery point"), or replay WAL the new primary never had and then never
  # stream. Rewinding it is the init container's (no probe limits it): exit 4, data untouched, saying so.
  code=0
  REWIND_STANDBY=check sh "$SCRIPTS_DIR/follow.sh" || code=$?
  if [ "$code" -eq 4 ]; then
    echo "entrypoint: delete the pod: its init container rewinds this standby onto $PRIMARY_POD's timeline" >&2
    exit 4
  elif [ "$code" -ne 0 ]; then
    echo "entrypoint: could not tell whether this standby diverged from $PRIMARY_POD (follow.sh exit $code): it starts as it is"
  fi
fi

# The WAL receiver's connection, in postgresql.auto.conf, where the operator's
# ALTER SYSTEM points a running replica at a new primary (and a reload applies
# it). It has no connect timeout of its own: without a TCP user timeout, a
# connect to the address of a primary that is gone waits for the kernel (about
# 130 s) before it resolves the name again. Keepalives find a primary that
# vanished without closing the connection. No password: the passfile has it
# (pg_basebackup -R and pg_rewind leave conninfo lines behind; they go).
conninfo=""
if [ "$ROLE" = replica ]; then
  conninfo="host=$PRIMARY_HOST port=${PRIMARY_PORT:-$PGPORT} user=$REPLICATION_USER"
  conninfo="$conninfo passfile=$REPLICATION_PASSFILE application_name=$POD_NAME"
  conninfo="$conninfo tcp_user_timeout=10000 keepalives_idle=10 keepalives_interval=5 keepalives_count=3"
  if [ -n "$PEER_SSL" ]; then
    conninfo="$conninfo $PEER_SSL"
  fi
elif [ -f "$PGDATA/standby.signal" ]; then
  echo "entrypoint: $PGDATA is still a standby: it serves read-only, following nobody, until the operator promotes it"
fi
slot=""
if [ "$ROLE" = replica ]; then
  # The slots stay on the server that was primary (a switchover, a failover's former primary): on a replica
  # nothing reads them, and they would keep its WAL until its disk fills.
  rm -rf "$PGDATA/pg_replslot/${ARCHIVE_SLOT:-mydb_archive}" "$PGDATA"/pg_replslot/mydb_replica_*
  # This replica's own slot on the primary keeps the WAL it has not received yet, however long it is paused or
  # cut off (max_slot_wal_keep_size bounds it); the operator keeps it there after a failover too. A primary
  # that does not answer now: the replica streams without one until the operator makes it.
  slot="mydb_replica_${POD_NAME##*-}"
  if ! PGPASSFILE="$REPLICATION_PASSFILE" pg_receivewal --create-slot --if-not-exists --slot="$slot" --no-password \
      -d "host=$PRIMARY_HOST port=${PRIMARY_PORT:-$PGPORT} user=$REPLICATION_USER connect_timeout=5 $PEER_SSL" \
      > /dev/null 2>&1; then
    echo "entrypoint: could not make replication slot $slot on $PRIMARY_HOST now: streaming without it"
    slot=""
  fi
fi
sed -i -e '/^primary_conninfo/d' -e '/^primary_slot_name/d' "$PGDATA/postgresql.auto.conf" 2>/dev/null || true
if [ -n "$conninfo" ]; then
  printf "primary_conninfo = '%s'\n" "$conninfo" >> "$PGDATA/postgresql.auto.conf"
fi
if [ -n "$slot" ]; then
  printf "primary_slot_name = '%s'\n" "$slot" >> "$PGDATA/postgresql.auto.conf"
fi

# Chart-managed parameters are copied in on every start, so a changed ConfigMap
# takes effect when the pod restarts (its checksum annotation makes that
# happen). The include line is relative to postgresql.conf and is copied to
# replicas by pg_basebackup; adding it here keeps older data directories right.
# rm + cat, not cp: cp would carry the ConfigMap's read-only mode over (and
# pg_basebackup copies it to replicas), so the next start could not overwrite it.
rm -f "$PGDATA/chart.conf"
if [ -f "$SCRIPTS_DIR/postgresql.conf" ]; then
  cat "$SCRIPTS_DIR/postgresql.conf" > "$PGDATA/chart.conf"
else
  : > "$PGDATA/chart.conf"
fi
include="include_if_exists = 'chart.conf'"
grep -qxF "$include" "$PGDATA/postgresql.conf" || printf '\n%s\n' "$include" >> "$PGDATA/postgresql.conf"

# Who may connect, written on every start beside the socket (hba_file), so a
# change of TLS takes effect at the next start whatever PGDATA's own file says:
# everyone authenticates, and with TLS_DIR a TCP connection without TLS
# matches no line and is refused.
tcp=host
set --
if [ -n "${TLS_DIR:-}" ]; then
  tcp=hostssl
  # The Secret's files as mounted, never copied: a renewed certificate
  # replaces them, and a reload (the operator's) makes the server present it.
  set -- -c ssl=on -c ssl_cert_file="$TLS_DIR/tls.crt" -c ssl_key_file="$TLS_DIR/tls.key"
fi
cat > "$SOCKET_DIR/pg_hba.conf" <<HBA
# Written by entrypoint.sh at each start.
local all all scram-sha-256
local replication all scram-sha-256
$tcp all all all scram-sha-256
$tcp replication all all scram-sha-256
HBA

# A primary serves only while it holds the primary lease (lease.pl, in the probe
# container, says so in LEASE_STATE_DIR/state): one that stopped because it could
# not confirm it waits here until it does, or until the record names another
# primary (the pod is then made again as a replica). "absent": no lease (the
# chart without the operator), nothing to wait for; "unsupported": an image
# whose perl has no HTTPS, the lease cannot be read (nothing is fenced).
if [ "$ROLE" = primary ] && [ -n "${LEASE_STATE_DIR:-}" ]; then
  waited=0
  while :; do
    state="$(cat "$LEASE_STATE_DIR/state" 2>/dev/null || echo starting)"
    case "$state" in held | absent) break ;; unsupported*) echo "entrypoint: $state"; break ;; esac
    if [ $((waited % 50)) -eq 0 ]; then
      echo "entrypoint: waiting for the primary lease before serving (lease.pl says: $state)"
    fi
    # lease.pl renews within a second of its start: every primary's start waits for it, so a short poll.
    sleep 0.2
    waited=$((waited + 1))
  done
fi

# exec: postgres becomes PID 1 and receives the container's signals itself.
# Command-line settings win over postgresql.conf: these are the chart's wiring.
exec postgres -D "$PGDATA" -p "$PGPORT" \
  -c listen_addresses="${LISTEN_ADDRESSES:-*}" \
  -c unix_socket_directories="$SOCKET_DIR" \
  -c hba_file="$SOCKET_DIR/pg_hba.conf" "$@"
