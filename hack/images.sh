#!/usr/bin/env bash
# Builds the container images of the local cluster's real node with Debian's
# buildah, from Debian's packages and this repository. Nothing is ever pulled
# from an image registry (every build is --pull=never):
#
#   debian         localhost/mydb/debian:bookworm   debootstrap --variant=minbase
#   debian-trixie  localhost/mydb/debian:trixie     of the suite from this
#                  machine's Debian mirror, plus the host's CA bundle
#   postgres       localhost/mydb/postgres:15.N and :15   bookworm's postgresql-15
#   postgres-17    localhost/mydb/postgres:17.N and :17   trixie's postgresql-17
#   pause          localhost/mydb/pause:1.0         containerd's sandbox image
#   golang         docker.io/library/golang:1.26-bookworm       local stand-ins for
#   python         docker.io/library/python:3.11-slim-bookworm  the Dockerfile's bases
#   operator       localhost/mydb/mydatabase-operator:<version>  the project's
#                  Dockerfile, unchanged
#
# One function builds the Debian base of any suite (build_debian), one any
# PostgreSQL major on the base of the suite that packages it (build_postgres,
# hack/images/postgres/Containerfile with ARG BASE and ARG PG_MAJOR); the
# BUILD table below says which image is built with which arguments.
#
# Each image carries a label (org.mydb.inputs) with a hash of what it is built
# from, its base image's id included, and is rebuilt only when that changes.
#
#   hack/images.sh [build]        build what is missing or stale
#   hack/images.sh --check        exit 0 only if every image is present and current
#   hack/images.sh push REGISTRY  build if needed, then push to REGISTRY
#                                 (a loopback registry over plain http)
#   hack/images.sh list           KEY=REF lines, REF relative to the registry:
#       DEBIAN_IMAGE=mydb/debian:bookworm       DEBIAN_TRIXIE_IMAGE=mydb/debian:trixie
#       POSTGRES_IMAGE=library/postgres:15.N    POSTGRES_MAJOR_IMAGE=library/postgres:15
#       POSTGRES17_IMAGE=library/postgres:17.N  POSTGRES17_MAJOR_IMAGE=library/postgres:17
#       PAUSE_IMAGE=mydb/pause:1.0              OPERATOR_IMAGE=mydb/mydatabase-operator:<version>
#       POSTGRES_STANDIN_15_2=library/postgres:15.2 (one per POSTGRES_STANDIN_TAGS)
#       POSTGRES_VERSION=15.N                   POSTGRES17_VERSION=17.N
#
# What goes into each image besides this script lives in hack/images/<name>/,
# named after its build function (both bases use debian/, both PostgreSQL
# images postgres/). Scratch space (a debootstrap tarball per suite, build
# logs) is under ${MYDB_CACHE:-~/.cache/mydb-operator}/images.
set -euo pipefail
# Builds run with runc: buildah would take crun (the real node's runtime) once it is installed, and crun
# refuses a host whose cgroup2 mount still offers a controller until the node is up (node_containers.py).
export BUILDAH_RUNTIME="${BUILDAH_RUNTIME:-runc}"
# A failing command inside $(...) must stop the script too.
shopt -s inherit_errexit

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "${HACK_DIR}")"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${HACK_DIR}/versions.env"

WORK="${MYDB_CACHE:-${HOME}/.cache/mydb-operator}/images"
INPUTS_LABEL=org.mydb.inputs
SUITE=bookworm   # the default base: the Dockerfile's stand-ins and PostgreSQL 15 use it
PG_MAJOR=15      # the PostgreSQL of the plain POSTGRES_* keys and of the stand-in tags
DEBIAN_REPO=localhost/mydb/debian
POSTGRES_REPO=localhost/mydb/postgres
OPERATOR_VERSION="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "${REPO}/pyproject.toml")"

# The stand-ins must carry exactly the names the Dockerfile's FROM lines use.
declare -A REF=(
  [debian]="${DEBIAN_REPO}:${SUITE}"
  [debian-trixie]="${DEBIAN_REPO}:trixie"
  [postgres]="${POSTGRES_REPO}:${PG_MAJOR}"
  [postgres-17]="${POSTGRES_REPO}:17"
  [pause]=localhost/mydb/pause:1.0
  [golang]=docker.io/library/golang:1.26-bookworm
  [python]=docker.io/library/python:3.11-slim-bookworm
  [operator]="localhost/mydb/mydatabase-operator:${OPERATOR_VERSION}"
)
# KEY -> build_<first word>, called with the inputs hash and the other words:
# build_debian SUITE, build_postgres MAJOR SUITE (the suite that packages it).
declare -A BUILD=(
  [debian]="debian ${SUITE}"                 [debian-trixie]="debian trixie"
  [postgres]="postgres ${PG_MAJOR} ${SUITE}" [postgres-17]="postgres 17 trixie"
  [pause]=pause [golang]=golang [python]=python [operator]=operator
)
# Every base before the images built FROM it.
ORDER=(debian debian-trixie postgres postgres-17 pause golang python operator)
declare -A BASES=([postgres]=debian [postgres-17]=debian-trixie [golang]=debian [python]=debian
                  [operator]="golang python")

declare -A BUILD_SECONDS=()  # what this run built, for the summary
BUILDING=""                  # the image being built, if any
LOG=/dev/null                # where the current step's tool output goes

log() { printf '[images %3ds] %s\n' "${SECONDS}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Tool output goes to the step's log file, shown only when something fails.
quiet() { "$@" >>"${LOG}" 2>&1; }

# ------------------------------------------------------------------ buildah

image_id() { buildah inspect --type image --format '{{.FromImageID}}' "$1" 2>/dev/null || true; }

image_inputs() {
  buildah inspect --type image --format "{{index .OCIv1.Config.Labels \"${INPUTS_LABEL}\"}}" "$1" \
    2>/dev/null || true
}

image_size() { buildah images --format '{{.Size}}' "$1" 2>/dev/null | head -n 1 || true; }

# Working containers have fixed names (one run at a time holds the lock), so
# a crashed run's leftovers are found and removed by name.
new_container() {  # NAME IMAGE
  buildah rm "$1" >/dev/null 2>&1 || true
  quiet buildah from --pull=never --name "$1" "$2"
}

remove_our_containers() {
  local name
  for name in $(buildah containers --format '{{.ContainerName}}' 2>/dev/null | grep '^mydb-images-' || true); do
    buildah rm "${name}" >/dev/null 2>&1 || true
  done
}

# A rebuilt image took the name from the old one: remove the old one, so the
# store does not grow with every build. rmi without -f leaves it alone when it
# still has other names or a container uses it.
remove_old() {  # IMAGE-ID
  if [[ -n "$1" ]]; then buildah rmi "$1" >/dev/null 2>&1 || true; fi
}

# ------------------------------------------------------------------- inputs

# The URIs of the host's apt sources (one-line and deb822 files, comments
# dropped), so the image is made from the same mirror as the host's packages.
# APT_DIR: for tests/hack/test_images.py.
apt_uris() {
  local f dir="${APT_DIR:-/etc/apt}"
  for f in "${dir}/sources.list" "${dir}"/sources.list.d/*.list "${dir}"/sources.list.d/*.sources; do
    if [[ -f "${f}" ]]; then sed 's/#.*//' "${f}"; fi
  done | grep -oE '(https?|ftp)://[^][[:space:]]+' | sed 's#/*$##' || true
}

debian_mirror() { apt_uris | grep -m 1 -E '/debian$' || true; }
security_mirror() { apt_uris | grep -m 1 -E '/debian-security$' || true; }

# A hash of the contents of the files under PATHS that git would see (tracked
# or untracked, not ignored), so an uncommitted edit counts and a build
# leftover does not. Paths are relative: a fresh clone elsewhere hashes alike.
source_digest() {  # PATHS...
  local f
  git ls-files -z --cached --others --exclude-standard -- "$@" | sort -zu |
    while IFS= read -r -d '' f; do
      if [[ -f "${f}" ]]; then sha256sum -- "${f}"; fi
    done | sha256sum | cut -c1-16
}

# Everything an image is built from, as text: its build function and that
# function's arguments, its folder under hack/images/ (named after the
# function), its bases' ids and whatever else goes into it.
inputs_of() {  # KEY
  local key="$1" base build
  read -ra build <<<"${BUILD[${key}]}"
  declare -f "build_${build[0]}"
  echo "arguments ${build[*]:1}"
  for base in ${BASES[${key}]:-}; do
    echo "base ${base} $(image_id "${REF[${base}]}")"
  done
  if [[ -d "hack/images/${build[0]}" ]]; then echo "files $(source_digest "hack/images/${build[0]}")"; fi
  case "${build[0]}" in
    debian) declare -f debian_tarball write_sources
            echo "$(debian_mirror) $(security_mirror)"
            sha256sum /etc/ssl/certs/ca-certificates.crt ;;
    # Its build ends by running the chart's scripts in it: a change to them is tested again.
    postgres) source_digest charts/mydatabase/scripts ;;
    pause | golang) go env GOVERSION GOROOT ;;
    operator) echo "${OPERATOR_VERSION} ${HELM_VERSION}"
              source_digest Dockerfile .dockerignore pyproject.toml README.md operator charts crds ;;
  esac
}

inputs_hash() { inputs_of "$1" | sha256sum | cut -c1-16; }

is_current() { [[ "$(image_inputs "${REF[$1]}")" == "$(inputs_hash "$1")" ]]; }

# ------------------------------------------------------------------- debian

# debootstrap is the slow part of a base (a minute or two), so its rootfs is
# kept as a tarball, one per suite; finish.sh applies the suite's updates on
# every build.
debian_tarball() {  # SUITE MIRROR -> prints the tarball's path
  local suite="$1" mirror="$2" tarball rootfs="${WORK}/rootfs"
  tarball="${WORK}/debian-${suite}-$(echo "${suite} ${mirror}" | sha256sum | cut -c1-12).tar"
  if [[ ! -s "${tarball}" ]]; then
    # --one-file-system: never descend into a /proc a failed debootstrap left
    # mounted. The other suites' tarballs stay.
    rm -rf --one-file-system "${rootfs}" "${WORK}/debian-${suite}-"*.tar*
    log "debootstrap ${suite} from ${mirror}"
    quiet debootstrap --variant=minbase --include=ca-certificates "${suite}" "${rootfs}" "${mirror}"
    # Devices come from the runtime; the host's resolv.conf and hostname and
    # debootstrap's one-line sources (build_debian writes its own) stay out.
    tar -C "${rootfs}" --numeric-owner -cf "${tarball}.partial" \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
      --exclude=./etc/resolv.conf --exclude=./etc/hostname --exclude=./etc/apt/sources.list \
      --exclude='./var/cache/apt/archives/*.deb' --exclude='./var/lib/apt/lists/*' .
    mv "${tarball}.partial" "${tarball}"
    rm -rf --one-file-system "${rootfs}"
  fi
  echo "${tarball}"
}

# An image's apt sources: the host's mirrors (whatever suite the host runs),
# with the image's suite and its updates and security fixes (PostgreSQL gets
# its point releases there).
write_sources() {  # SUITE FILE
  local suite="$1" mirror security
  mirror="$(debian_mirror)"
  security="$(security_mirror)"
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n' \
    "${mirror}" "${suite}" "${suite}" /usr/share/keyrings/debian-archive-keyring.gpg > "$2"
  if [[ -n "${security}" ]]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: %s\n' \
      "${security}" "${suite}" /usr/share/keyrings/debian-archive-keyring.gpg >> "$2"
  fi
}

build_debian() {  # INPUTS-HASH SUITE
  local suite="$2" ctr="mydb-images-debian-$2" mirror tarball
  mirror="$(debian_mirror)"
  [[ -n "${mirror}" ]] || die "no Debian mirror (a URI ending in /debian) in /etc/apt/sources.list*"
  tarball="$(debian_tarball "${suite}" "${mirror}")"
  write_sources "${suite}" "${WORK}/debian-${suite}.sources"
  new_container "${ctr}" scratch
  quiet buildah add "${ctr}" "${tarball}" /
  quiet buildah copy "${ctr}" "${WORK}/debian-${suite}.sources" /etc/apt/sources.list.d/debian.sources
  quiet buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd '["bash"]' "${ctr}"
  quiet buildah run --network host "${ctr}" -- sh -c "$(cat hack/images/debian/finish.sh)"
  # Last, so no package's trigger rebuilds it: the host's bundle holds the CA
  # of the TLS-intercepting proxy through which builds reach PyPI and the Go
  # module proxy; Debian's bundle alone cannot verify those connections.
  quiet buildah copy "${ctr}" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
  quiet buildah config --label "${INPUTS_LABEL}=$1" "${ctr}"
  quiet buildah commit --rm "${ctr}" "${DEBIAN_REPO}:${suite}"
}

# ----------------------------------------------------------------- postgres

# Debian's postgresql-MAJOR of SUITE, FROM that suite's base, as
# POSTGRES_REPO:MAJOR and POSTGRES_REPO:<its real version>.
build_postgres() {  # INPUTS-HASH MAJOR SUITE
  local major="$2" suite="$3" ctr=mydb-images-check ref="${POSTGRES_REPO}:$2" version
  # --layers: a change of the chart's scripts runs the smoke test again on the cached
  # package layers, instead of installing PostgreSQL again (about a minute per major).
  quiet buildah bud --network=host --pull=never --layers --label "${INPUTS_LABEL}=$1" \
    --build-arg "BASE=${DEBIAN_REPO}:${suite}" --build-arg "PG_MAJOR=${major}" \
    -f hack/images/postgres/Containerfile -t "${ref}" hack/images/postgres
  new_container "${ctr}" "${ref}"
  # "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)" -> 15.14
  version="$(buildah run --network none "${ctr}" -- postgres --version |
    sed -n 's/^postgres (PostgreSQL) \([0-9]*\.[0-9]*\).*/\1/p')"
  [[ "${version}" == "${major}".* ]] || die "postgres --version in the image gave '${version}'"
  log "postgres ${version}: running the chart's scripts in it (hack/images/postgres/smoke-test.sh)"
  quiet buildah run --network none --user 999:999 \
    -v "${REPO}/charts/mydatabase/scripts:/scripts:ro" -v "${REPO}/hack/images/postgres:/smoke:ro" \
    "${ctr}" -- sh /smoke/smoke-test.sh
  quiet buildah rm "${ctr}"
  quiet buildah tag "${ref}" "${POSTGRES_REPO}:${version}"
}

# The full version's tag is the other name of the :MAJOR image.
postgres_version() {  # MAJOR
  local id name
  id="$(image_id "${POSTGRES_REPO}:$1")"
  [[ -n "${id}" ]] || return 0
  for name in $(buildah images --format '{{.Name}}:{{.Tag}}' --filter "id=${id}" 2>/dev/null); do
    case "${name}" in "${POSTGRES_REPO}:$1".*) echo "${name##*:}"; return ;; esac
  done
}

# -------------------------------------------------------------------- pause

build_pause() {  # INPUTS-HASH
  local ctr=mydb-images-pause out="${WORK}/pause"
  (cd hack/images/pause &&
    CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off quiet go build -trimpath -ldflags '-s -w' -o "${out}" .)
  # It must exit 0 on SIGTERM, or every pod's deletion waits for the kill.
  timeout --preserve-status -s TERM 1 "${out}" || die "the pause binary did not exit 0 on SIGTERM"
  new_container "${ctr}" scratch
  quiet buildah copy "${ctr}" "${out}" /pause
  # 65535: the same unprivileged user as the upstream pause image.
  quiet buildah config --entrypoint '["/pause"]' --user 65535:65535 --label "${INPUTS_LABEL}=$1" "${ctr}"
  quiet buildah commit --rm "${ctr}" "${REF[pause]}"
}

# ------------------------------------------------------ the Dockerfile's bases

build_golang() {  # INPUTS-HASH
  local version want
  version="$(go env GOVERSION)"
  want="${REF[golang]##*:}"
  want="${want%%-*}"
  [[ "${version}" == "go${want}."* ]] || die "${REF[golang]} would hold this machine's ${version}"
  # The context is the machine's own GOROOT: the same Go that builds the rest.
  quiet buildah bud --network=host --pull=never --label "${INPUTS_LABEL}=$1" \
    --build-arg "GOLANG_VERSION=${version#go}" --ignorefile hack/images/golang/ignore \
    -f hack/images/golang/Containerfile -t "${REF[golang]}" "$(go env GOROOT)"
}

build_python() {  # INPUTS-HASH
  quiet buildah bud --network=host --pull=never --label "${INPUTS_LABEL}=$1" \
    -f hack/images/python/Containerfile -t "${REF[python]}" hack/images/python
}

# Fails early and clearly when the Dockerfile moves to a base with no stand-in.
check_dockerfile_bases() {
  local from
  while read -r _ from _; do
    case "docker.io/library/${from}" in
      "${REF[golang]}" | "${REF[python]}") ;;
      *) die "the Dockerfile uses FROM ${from}; hack/images.sh builds no stand-in for it" ;;
    esac
  done < <(grep -E '^FROM[[:space:]]' Dockerfile)
}

# ----------------------------------------------------------------- operator

build_operator() {  # INPUTS-HASH
  local ctr=mydb-images-check uid
  check_dockerfile_bases
  quiet buildah bud --network=host --pull=never --layers --label "${INPUTS_LABEL}=$1" \
    --build-arg "VERSION=${OPERATOR_VERSION}" --build-arg "HELM_VERSION=${HELM_VERSION}" \
    -f Dockerfile -t "${REF[operator]}" .
  new_container "${ctr}" "${REF[operator]}"
  uid="$(buildah run --network none "${ctr}" -- id -u)"
  [[ "${uid}" == 10001 ]] || die "the operator image runs as uid ${uid}, not 10001"
  quiet buildah run --network none "${ctr}" -- /opt/venv/bin/mydb-operator --help
  quiet buildah rm "${ctr}"
}

# ------------------------------------------------------------------ commands

ensure() {  # KEY: build the image unless it is current
  local key="$1" want have state start old build
  want="$(inputs_hash "${key}")"
  have="$(image_inputs "${REF[${key}]}")"
  [[ "${have}" != "${want}" ]] || return 0
  old="$(image_id "${REF[${key}]}")"
  state=cold
  if [[ -n "${old}" ]]; then state=stale; fi
  LOG="${WORK}/logs/${key}.log"
  : > "${LOG}"
  log "building ${key} (${state}); output in ${LOG}"
  BUILDING="${key}"
  start="${SECONDS}"
  read -ra build <<<"${BUILD[${key}]}"
  "build_${build[0]}" "${want}" "${build[@]:1}"
  BUILD_SECONDS[${key}]=$((SECONDS - start))
  BUILDING=""
  LOG=/dev/null
  [[ "$(image_id "${REF[${key}]}")" == "${old}" ]] || remove_old "${old}"
  log "built ${key} in ${BUILD_SECONDS[${key}]}s: ${REF[${key}]}, $(image_size "${REF[${key}]}")"
}

build_all() {
  local key
  for key in "${ORDER[@]}"; do ensure "${key}"; done
}

check_all() {
  local key stale=0
  for key in "${ORDER[@]}"; do
    if ! is_current "${key}"; then
      log "${key}: missing or stale (${REF[${key}]})"
      stale=1
    fi
  done
  if (( stale == 0 )); then log "all images current"; fi
  return "${stale}"
}

summary() {
  local key took
  for key in "${ORDER[@]}"; do
    took="up to date"
    if [[ -n "${BUILD_SECONDS[${key}]:-}" ]]; then took="built in ${BUILD_SECONDS[${key}]}s"; fi
    log "$(printf '%-13s %-46s %-16s %s' "${key}" "${REF[${key}]}" "${took}" "$(image_size "${REF[${key}]}")")"
  done
}

# The version of each PostgreSQL image, or die: what list and push name them by.
postgres_versions() {  # -> MAJOR VERSION lines
  local key build major version
  for key in "${ORDER[@]}"; do
    read -r build major _ <<<"${BUILD[${key}]}"
    [[ "${build}" == postgres ]] || continue
    version="$(postgres_version "${major}")"
    [[ -n "${version}" ]] || die "no ${REF[${key}]} image: run hack/images.sh build first"
    echo "${major} ${version}"
  done
}

# The list key of a PostgreSQL major: POSTGRES for PG_MAJOR (the keys the
# tests have always read), POSTGRES<major> for the others.
postgres_key() { if [[ "$1" == "${PG_MAJOR}" ]]; then echo POSTGRES; else echo "POSTGRES$1"; fi; }

# What goes to the registry: KEY LOCAL-REF NAME (NAME relative to the
# registry). PostgreSQL goes where charts/mydatabase looks for it by default
# (library/postgres, tag = the database's version, and its major). VERSIONS:
# postgres_versions's lines, when the caller has them (each listing runs buildah).
published() {  # [VERSIONS]
  local versions="${1:-}" major version key
  [[ -n "${versions}" ]] || versions="$(postgres_versions)"
  printf '%s %s %s\n' \
    DEBIAN_IMAGE "${REF[debian]}" "mydb/debian:${SUITE}" \
    DEBIAN_TRIXIE_IMAGE "${REF[debian-trixie]}" "mydb/debian:trixie"
  while read -r major version; do
    key="$(postgres_key "${major}")"
    printf '%s %s %s\n' \
      "${key}_IMAGE" "${POSTGRES_REPO}:${version}" "library/postgres:${version}" \
      "${key}_MAJOR_IMAGE" "${POSTGRES_REPO}:${major}" "library/postgres:${major}"
  done <<<"${versions}"
  printf '%s %s %s\n' \
    PAUSE_IMAGE "${REF[pause]}" "mydb/pause:${REF[pause]##*:}" \
    OPERATOR_IMAGE "${REF[operator]}" "mydb/mydatabase-operator:${OPERATOR_VERSION}"
  # Stand-ins: the same build under the versions the seed and the tests ask
  # for (postgres --version in them shows the real one).
  local tag
  for tag in ${POSTGRES_STANDIN_TAGS}; do
    printf '%s %s %s\n' "POSTGRES_STANDIN_${tag//./_}" "${REF[postgres]}" "library/postgres:${tag}"
  done
}

list() {
  local lines key ref name versions major version
  versions="$(postgres_versions)"
  lines="$(published "${versions}")"
  while read -r key ref name; do echo "${key}=${name}"; done <<<"${lines}"
  while read -r major version; do
    echo "$(postgres_key "${major}")_VERSION=${version}"
  done <<<"${versions}"
}

# The config digest the registry holds for REGISTRY/NAME:TAG, if any. A push
# keeps the image's config blob as it is, so it equals the local image id
# even though the layers are compressed on the way.
remote_config_digest() {  # REGISTRY/NAME:TAG
  local registry="${1%%/*}" rest="${1#*/}"
  curl -fsS --noproxy '*' --max-time 10 \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://${registry}/v2/${rest%:*}/manifests/${rest##*:}" 2>/dev/null |
    tr -d '[:space:]' | grep -o '"config":{[^}]*}' | grep -o 'sha256:[0-9a-f]\{64\}' || true
}

push_all() {  # REGISTRY
  local registry="$1" lines key ref name start
  # Network rule of this workplace: images go to a registry on this machine only.
  case "${registry}" in
    127.* | localhost | localhost:* | '[::1]'*) ;;
    *) die "push: ${registry} is not a loopback registry" ;;
  esac
  lines="$(published)"
  LOG="${WORK}/logs/push.log"
  : > "${LOG}"
  while read -r key ref name; do
    if [[ "$(remote_config_digest "${registry}/${name}")" == "sha256:$(image_id "${ref}")" ]]; then
      log "push ${registry}/${name}: already there"
      continue
    fi
    start="${SECONDS}"
    quiet buildah push --tls-verify=false --quiet "${ref}" "docker://${registry}/${name}"
    log "pushed ${registry}/${name} in $((SECONDS - start))s"
  done <<<"${lines}"
  LOG=/dev/null
}

# One run at a time: two builds would fight over the working containers.
take_lock() {
  exec 9>"${WORK}/.lock"
  if ! flock -n 9; then
    log "waiting for another hack/images.sh to finish"
    flock 9
  fi
}

on_exit() {
  local rc=$?
  remove_our_containers
  if (( rc != 0 )) && [[ -n "${BUILDING}" ]]; then
    # A half-built or unverified image must not look current to the next run.
    buildah rmi "${REF[${BUILDING}]}" >/dev/null 2>&1 || true
    log "building ${BUILDING} failed; the end of ${LOG}:"
    tail -n 30 "${LOG}" >&2 || true
  fi
}

usage() {
  echo "usage: hack/images.sh [build | --check | push REGISTRY | list]" >&2
  exit 2
}

main() {
  cd "${REPO}"
  mkdir -p "${WORK}/logs"
  case "${1:-build}" in
    build) [[ $# -le 1 ]] || usage
           take_lock; trap on_exit EXIT; build_all; summary ;;
    --check) [[ $# -eq 1 ]] || usage
             check_all ;;
    push) [[ $# -eq 2 ]] || usage
          take_lock; trap on_exit EXIT; build_all; push_all "$2"; summary ;;
    list) [[ $# -eq 1 ]] || usage
          list ;;
    *) usage ;;
  esac
}

# Sourced (by tests/hack/test_images.py), it only defines the functions.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
