#!/usr/bin/env bash
# Installs the external scanners of tests/chart/test_scanners.py, once, into
# the cache build-tools.sh uses:
#
#   ${MYDB_CACHE:-~/.cache/mydb-operator}/bin/scanners-<hash>/
#     kube-score      built with `go build` from the Go module proxy (KUBE_SCORE_VERSION)
#     checkov-venv/   a venv of its own holding checkov (CHECKOV_VERSION) and exactly the
#                     packages pinned in hack/scanners/checkov-requirements.txt; the
#                     operator's .venv never sees them
#     checkov         a link to checkov-venv/bin/checkov
#
# <hash> covers the two versions, the pinned requirements and the Python that
# runs the venv; nothing else (editing this script does not reinstall). A
# directory is trusted only when its stamp exists and both scanners answer
# with the pinned version; anything else is rebuilt. A warm run starts no
# download and no compiler. Prints the directory on the last line of stdout.
# With --check it only reports (exit 0 and the directory: complete) and
# installs nothing.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"
REQUIREMENTS="${HACK_DIR}/scanners/checkov-requirements.txt"
PYTHON="${PYTHON:-python3}"

CACHE_ROOT="${MYDB_CACHE:-${HOME}/.cache/mydb-operator}"
PY_ID="$("${PYTHON}" -c 'import sys; print(sys.version.split()[0], sys.base_prefix)')"
HASH="$(
  echo "KUBE_SCORE_VERSION=${KUBE_SCORE_VERSION}"
  echo "CHECKOV_VERSION=${CHECKOV_VERSION}"
  echo "python=${PY_ID}"
  grep -v '^#' "${REQUIREMENTS}"
)"
HASH="$(sha256sum <<<"${HASH}" | cut -c1-12)"
DIR="${CACHE_ROOT}/bin/scanners-${HASH}"
STAMP="${DIR}/.complete"

START=$(date +%s)
log() { printf '[build-scanners %4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }

cache_is_complete() {
  [[ -f "${STAMP}" && -x "${DIR}/kube-score" && -x "${DIR}/checkov" ]] || return 1
  # Cheap answers: `checkov --version` imports the whole scanner (seconds).
  [[ "$("${DIR}/kube-score" version 2>/dev/null)" == "kube-score version: ${KUBE_SCORE_VERSION},"* ]] || return 1
  [[ "$("${DIR}/checkov-venv/bin/python" -c 'from checkov.version import version; print(version)' 2>/dev/null)" \
     == "${CHECKOV_VERSION}" ]] || return 1
}

build_kube_score() {
  local work="${CACHE_ROOT}/work/kube-score"
  rm -rf "${work}" && mkdir -p "${work}"
  printf '%s\n' "module mydb-tools/kube-score" "" "go 1.26.0" "" \
    "require github.com/zegl/kube-score ${KUBE_SCORE_VERSION}" "" \
    "tool github.com/zegl/kube-score/cmd/kube-score" > "${work}/go.mod"
  log "kube-score ${KUBE_SCORE_VERSION}: resolving modules (downloads on a cold cache)"
  (cd "${work}" && go mod tidy 2>&1 | { grep -v '^go: downloading' >&2 || true; })
  log "building kube-score"
  (cd "${work}" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
     go build -trimpath -ldflags "-s -w -X main.version=${KUBE_SCORE_VERSION}" \
     -o "${DIR}/kube-score" github.com/zegl/kube-score/cmd/kube-score)
}

install_checkov() {
  log "checkov ${CHECKOV_VERSION}: a venv of its own, the pinned requirements (downloads on a cold pip cache)"
  grep -qx "checkov==${CHECKOV_VERSION}" "${REQUIREMENTS}" || {
    log "FAILED: ${REQUIREMENTS} does not pin checkov==${CHECKOV_VERSION} (regenerate it, see its header)"
    exit 1
  }
  "${PYTHON}" -m venv "${DIR}/checkov-venv"
  "${DIR}/checkov-venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "${REQUIREMENTS}" >&2
  # --no-deps installs the list as it is; pip check says whether it is complete.
  "${DIR}/checkov-venv/bin/python" -m pip check --disable-pip-version-check >&2
  ln -s checkov-venv/bin/checkov "${DIR}/checkov"
}

if [[ "${1:-}" == "--check" ]]; then
  if cache_is_complete; then log "cache complete: ${DIR}"; echo "${DIR}"; exit 0; fi
  log "cache missing, partial or broken: ${DIR}"; exit 1
fi

if cache_is_complete; then
  log "cache hit: ${DIR}"
else
  log "installing into ${DIR} (kube-score ${KUBE_SCORE_VERSION}, checkov ${CHECKOV_VERSION})"
  rm -rf "${DIR}"
  mkdir -p "${DIR}"
  build_kube_score
  install_checkov
  touch "${STAMP}"
  if ! cache_is_complete; then
    rm -f "${STAMP}"
    log "FAILED: a scanner does not answer with its pinned version"
    exit 1
  fi
  log "done: ${DIR}"
fi
echo "${DIR}"
