# shellcheck shell=sh
# Sourced by entrypoint.sh (not run on its own): which pod is the primary, so
# which role this pod starts in. The operator owns the answer: it records the
# primary in the ConfigMap <name>-primary, mounted here as PRIMARY_RECORD,
# when it first moves the primary away from ordinal 0 (a failover, a
# switchover). Until then, or with the chart installed alone, there is no
# record and ordinal 0 is the primary.
#
#   POD_NAME        <name>-<ordinal>
#   PRIMARY_RECORD  a file whose first line names the primary pod (optional)
#   PEER_DOMAIN     the pods' DNS domain, <name>-headless.<namespace>.svc
#   PRIMARY_HOST    outside Kubernetes: the recorded primary's address, used as
#                   is instead of <primary>.<PEER_DOMAIN>
#
# Sets ROLE (primary or replica), PRIMARY_POD, PRIMARY_HOST (replicas only)
# and RECORDED (true when a record named the primary).

RECORDED=false
PRIMARY_POD="${POD_NAME%-*}-0"
if [ -n "${PRIMARY_RECORD:-}" ] && [ -s "$PRIMARY_RECORD" ]; then
  recorded="$(head -n 1 "$PRIMARY_RECORD")"
  case "$recorded" in
    "${POD_NAME%-*}"-[0-9] | "${POD_NAME%-*}"-[0-9][0-9]) ;;
    *) echo "role: $PRIMARY_RECORD names '$recorded', not a pod of ${POD_NAME%-*}" >&2; exit 1 ;;
  esac
  PRIMARY_POD="$recorded"
  # shellcheck disable=SC2034 # read by the scripts that source this one
  RECORDED=true
fi
# shellcheck disable=SC2034 # ROLE is read by the scripts that source this one
if [ "$PRIMARY_POD" = "$POD_NAME" ]; then
  ROLE=primary
else
  ROLE=replica
  if [ -z "${PRIMARY_HOST:-}" ]; then
    : "${PEER_DOMAIN:?PEER_DOMAIN (or PRIMARY_HOST) is required}"
    PRIMARY_HOST="$PRIMARY_POD.$PEER_DOMAIN"
  fi
fi
