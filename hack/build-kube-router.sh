#!/usr/bin/env bash
# Builds the real nodes' NetworkPolicy engine, once, into the cache
# build-tools.sh uses (a folder of its own, so adding it rebuilt no other tool):
#
#   ${MYDB_CACHE:-~/.cache/mydb-operator}/bin/kube-router-<hash>/kube-router
#
# kube-router KUBE_ROUTER_VERSION from the Go module proxy, in a tools module
# that raises the dependencies KUBE_ROUTER_PINS names past the releases with
# reported flaws; no kube-router source is copied. The node runs its firewall
# controller only (hack/node_policies.py; docs/real-node.md says why this
# engine). <hash> covers the version and the pins. A folder is trusted only
# when its stamp exists and the binary answers --version with the pinned
# version. Prints the binary's path on the last line of stdout. With --check
# it only reports (exit 0: built) and builds nothing.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"

CACHE_ROOT="${MYDB_CACHE:-${HOME}/.cache/mydb-operator}"
HASH="$(printf 'KUBE_ROUTER_VERSION=%s\nKUBE_ROUTER_PINS=%s\n' "${KUBE_ROUTER_VERSION}" "${KUBE_ROUTER_PINS}" \
  | sha256sum | cut -c1-12)"
DIR="${CACHE_ROOT}/bin/kube-router-${HASH}"
BINARY="${DIR}/kube-router"
STAMP="${DIR}/.complete"
MODULE=github.com/cloudnativelabs/kube-router/v2

START=$(date +%s)
log() { printf '[build-kube-router %4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }

is_built() {
  [[ -f "${STAMP}" && -x "${BINARY}" ]] || return 1
  # It prints "Running kube-router version vX, built on ..." on stderr, and exits 1.
  { "${BINARY}" --version 2>&1 || true; } | grep -q "version ${KUBE_ROUTER_VERSION},"
}

if [[ "${1:-}" == "--check" ]]; then
  if is_built; then log "built: ${BINARY}"; echo "${BINARY}"; exit 0; fi
  log "not built: ${BINARY}"; exit 1
fi

if is_built; then
  log "cache hit: ${BINARY}"
else
  work="${CACHE_ROOT}/work/kube-router"
  rm -rf "${work}" "${DIR}" && mkdir -p "${work}" "${DIR}"
  printf '%s\n' "module mydb-tools/kube-router" "" "go 1.26.0" > "${work}/go.mod"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
  log "kube-router ${KUBE_ROUTER_VERSION}: resolving modules (downloads on a cold cache: minutes)"
  (cd "${work}" && go get -tool "${MODULE}/cmd/kube-router@${KUBE_ROUTER_VERSION}" \
     2>&1 | { grep -v '^go: \(downloading\|added\|upgraded\)' >&2 || true; })
  # shellcheck disable=SC2086 # KUBE_ROUTER_PINS is a list of module@version words
  (cd "${work}" && go get ${KUBE_ROUTER_PINS} 2>&1 | { grep -v '^go: \(downloading\|added\|upgraded\)' >&2 || true; })
  (cd "${work}" && go mod tidy 2>&1 | { grep -v '^go: downloading' >&2 || true; })
  log "building kube-router"
  (cd "${work}" && go build -trimpath \
     -ldflags "-s -w -X ${MODULE}/pkg/version.Version=${KUBE_ROUTER_VERSION}" \
     -o "${BINARY}" "${MODULE}/cmd/kube-router")
  touch "${STAMP}"
  is_built || { rm -f "${STAMP}"; log "FAILED: ${BINARY} does not answer --version with ${KUBE_ROUTER_VERSION}"; exit 1; }
  log "done: ${BINARY}"
fi
echo "${BINARY}"
