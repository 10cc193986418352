#!/usr/bin/env bash
# Builds the local cluster's binaries from Go modules, once, into a cache
# outside the repository:
#
#   ${MYDB_CACHE:-~/.cache/mydb-operator}/bin/<versions-hash>/
#
# The control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, helm) and the real node's own parts (kubelet,
# kube-proxy, CoreDNS, an OCI registry). CoreDNS and the registry are built
# from small main packages in hack/tools/ that link only the plugins and the
# storage driver the cluster uses.
#
# A directory is only trusted when its stamp file exists and every binary in
# it answers --version (once: the stamp then records the binaries as they
# were, and a later check that finds them unchanged runs none); anything else
# is a partial or broken build and is rebuilt. Prints the cache's bin directory on the last line of stdout.
# With --check it only reports (exit 0: complete) and builds nothing.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"

CACHE_ROOT="${MYDB_CACHE:-${HOME}/.cache/mydb-operator}"
# Only what is built names the cache (the tools' pinned versions and the
# sources in hack/tools/): editing this script, or an image version in
# versions.env, does not throw away a build that took many minutes.
TOOL_VERSIONS=(ETCD_VERSION KUBERNETES_VERSION KWOK_VERSION HELM_VERSION COREDNS_VERSION DISTRIBUTION_VERSION)
VERSIONS_HASH="$(
  for v in "${TOOL_VERSIONS[@]}"; do echo "${v}=${!v}"; done
  cat "${HACK_DIR}"/tools/*/main.go
)"
VERSIONS_HASH="$(sha256sum <<<"${VERSIONS_HASH}" | cut -c1-12)"
BIN_DIR="${CACHE_ROOT}/bin/${VERSIONS_HASH}"
STAMP="${BIN_DIR}/.complete"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm
          kubelet kube-proxy coredns registry)

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
START=$(date +%s)

log() { printf '[build-tools %4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }

# The binaries as they are now: size, change time and inode of each, a line each.
fingerprint() {
  local b
  for b in "${BINARIES[@]}"; do stat -L -c "${b} %s %Z %i" "${BIN_DIR}/${b}" || return 1; done
}

cache_is_complete() {
  [[ -f "${STAMP}" ]] || return 1
  local b seen
  seen="$(fingerprint 2>/dev/null)" || return 1
  # Every binary answered since it last changed (the stamp holds them as they were then): a hit costs a
  # stat, not eleven programs' starts (0.6 CPU-s and 1 to 4 s, some forty times a make test).
  [[ "$(cat "${STAMP}")" == "${seen}" ]] && return 0
  for b in "${BINARIES[@]}"; do
    [[ -x "${BIN_DIR}/${b}" ]] || return 1
    case "${b}" in
      kubectl) "${BIN_DIR}/${b}" version --client >/dev/null 2>&1 ;;
      helm) "${BIN_DIR}/${b}" version >/dev/null 2>&1 ;;
      coredns) "${BIN_DIR}/${b}" -version >/dev/null 2>&1 ;;
      *) "${BIN_DIR}/${b}" --version >/dev/null 2>&1 ;;
    esac || return 1
  done
  # Replaced whole, so a concurrent reader sees the old stamp or the new; a read-only cache is checked each time.
  { printf '%s\n' "${seen}" > "${STAMP}.$$" && mv -f "${STAMP}.$$" "${STAMP}"; } 2>/dev/null || rm -f "${STAMP}.$$"
}

# go build -v names each package as it compiles it: turn that into a
# progress line every 100 packages so a cold build is never silent.
progress() {
  local what="$1" n=0 line
  while IFS= read -r line; do
    case "${line}" in
      *.go:*) printf '%s\n' "${line}" >&2 ;;  # a compiler message, not a package name
    esac
    n=$((n + 1))
    if (( n % 100 == 0 )); then log "${what}: ${n} packages compiled"; fi
  done
  log "${what}: ${n} packages compiled in total"
}

# new_tools_module DIR MODULE-LINES... writes a go.mod and resolves it.
new_tools_module() {
  local dir="$1"; shift
  rm -rf "${dir}" && mkdir -p "${dir}"
  printf '%s\n' "module mydb-tools/$(basename "${dir}")" "" "go 1.26.0" "" "$@" > "${dir}/go.mod"
  log "$(basename "${dir}"): resolving modules (downloads on a cold cache)"
  (cd "${dir}" && go mod tidy 2>&1 | { grep -v '^go: downloading' >&2 || true; })
  (cd "${dir}" && go mod download 2>&1 | { grep -v '^go: downloading' >&2 || true; })
}

build_tool() {
  local dir="$1" out="$2" pkg="$3" ldflags="${4:-}"
  log "building ${out} (${pkg})"
  (cd "${dir}" && go build -v -trimpath -ldflags "-s -w ${ldflags}" -o "${BIN_DIR}/${out}" "${pkg}" 2>&1) | progress "${out}"
  [[ -x "${BIN_DIR}/${out}" ]] || { log "FAILED to build ${out}"; exit 1; }
}

build_etcd() {
  local dir="${WORK}/etcd"
  new_tools_module "${dir}" "require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}" "tool go.etcd.io/etcd/server/v3"
  build_tool "${dir}" etcd go.etcd.io/etcd/server/v3
}

build_kubernetes() {
  local dir="${WORK}/kubernetes" staging_version minor replaces=() m
  # Every staging module k8s.io/X is published as k8s.io/X v0.<minor>.<patch>.
  staging_version="v0.${KUBERNETES_VERSION#v1.}"
  minor="$(cut -d. -f2 <<<"${KUBERNETES_VERSION}")"
  local gomod
  gomod="$(cd "${WORK}" && go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  while read -r m; do
    replaces+=("replace ${m} => ${m} ${staging_version}")
  done < <(sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "${gomod}")
  log "kubernetes: ${#replaces[@]} staging modules pinned to ${staging_version}"
  new_tools_module "${dir}" "require k8s.io/kubernetes ${KUBERNETES_VERSION}" "${replaces[@]}" \
    "tool (" \
    "  k8s.io/kubernetes/cmd/kube-apiserver" \
    "  k8s.io/kubernetes/cmd/kube-controller-manager" \
    "  k8s.io/kubernetes/cmd/kube-scheduler" \
    "  k8s.io/kubernetes/cmd/kubectl" \
    "  k8s.io/kubernetes/cmd/kubelet" \
    "  k8s.io/kubernetes/cmd/kube-proxy" \
    ")"
  local v ld=""
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X ${v}.gitVersion=${KUBERNETES_VERSION} -X ${v}.gitMajor=1 -X ${v}.gitMinor=${minor}"
    ld+=" -X ${v}.gitTreeState=clean -X ${v}.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
    build_tool "${dir}" "${c}" "k8s.io/kubernetes/cmd/${c}" "${ld}"
  done
}

build_kwok() {
  local dir="${WORK}/kwok" moddir
  new_tools_module "${dir}" "require sigs.k8s.io/kwok ${KWOK_VERSION}" "tool sigs.k8s.io/kwok/cmd/kwok"
  build_tool "${dir}" kwok sigs.k8s.io/kwok/cmd/kwok \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  # kwok v0.8 takes its stages through --config; they ship in the module.
  moddir="$(cd "${dir}" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  mkdir -p "${BIN_DIR}/kwok-stages"
  cp -r "${moddir}/kustomize/stage/." "${BIN_DIR}/kwok-stages/"
  chmod -R u+w "${BIN_DIR}/kwok-stages"
}

build_helm() {
  local dir="${WORK}/helm"
  new_tools_module "${dir}" "require helm.sh/helm/v4 ${HELM_VERSION}" "tool helm.sh/helm/v4/cmd/helm"
  build_tool "${dir}" helm helm.sh/helm/v4/cmd/helm \
    "-X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}"
}

# A main package of ours (hack/tools/NAME/main.go) in a tools module that
# requires MODULE at VERSION.
build_own_main() {
  local name="$1" module="$2" version="$3" ldflags="${4:-}" dir="${WORK}/$1"
  rm -rf "${dir}" && mkdir -p "${dir}"
  cp "${HACK_DIR}/tools/${name}/main.go" "${dir}/"
  printf '%s\n' "module mydb-tools/${name}" "" "go 1.26.0" "" "require ${module} ${version}" > "${dir}/go.mod"
  log "${name}: resolving modules (downloads on a cold cache)"
  (cd "${dir}" && go mod tidy 2>&1 | { grep -v '^go: downloading' >&2 || true; })
  build_tool "${dir}" "${name}" . "${ldflags}"
}

build_coredns() {
  build_own_main coredns github.com/coredns/coredns "${COREDNS_VERSION}"
}

build_registry() {
  build_own_main registry github.com/distribution/distribution/v3 "${DISTRIBUTION_VERSION}" \
    "-X github.com/distribution/distribution/v3/version.version=${DISTRIBUTION_VERSION}"
}

if [[ "${1:-}" == "--check" ]]; then
  # Report only: 0 when the cache is complete and every binary runs.
  if cache_is_complete; then log "cache complete: ${BIN_DIR}"; exit 0; fi
  log "cache missing, partial or broken: ${BIN_DIR}"; exit 1
fi

if cache_is_complete; then
  log "cache hit: ${BIN_DIR}"
else
  log "building into ${BIN_DIR} (versions: etcd ${ETCD_VERSION}, kubernetes ${KUBERNETES_VERSION}, kwok ${KWOK_VERSION}, helm ${HELM_VERSION}, coredns ${COREDNS_VERSION}, distribution ${DISTRIBUTION_VERSION})"
  log "a cold build downloads modules and compiles for many minutes; progress follows"
  rm -rf "${BIN_DIR}"
  mkdir -p "${BIN_DIR}"
  WORK="${CACHE_ROOT}/work"
  mkdir -p "${WORK}"
  printf 'module mydb-tools/scratch\n\ngo 1.26.0\n' > "${WORK}/go.mod"
  build_etcd
  build_helm
  build_kwok
  build_kubernetes
  build_coredns
  build_registry
  cache_is_complete_without_stamp() { touch "${STAMP}"; cache_is_complete; }
  if ! cache_is_complete_without_stamp; then
    rm -f "${STAMP}"
    log "FAILED: a built binary does not answer --version"
    exit 1
  fi
  log "done: ${BIN_DIR}"
fi
echo "${BIN_DIR}"
