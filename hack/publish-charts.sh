#!/usr/bin/env bash
# Publishes the project's charts as OCI artifacts to a loopback registry
# served over plain HTTP (the local cluster's, see REGISTRY in hack/node_containers.py):
#
#   hack/publish-charts.sh 127.0.0.1:16400
#
# Packages charts/mydatabase and charts/mydatabase-operator with the pinned
# Helm (hack/build-tools.sh) and pushes each to oci://REGISTRY/charts, so that
# the operator can run one with
#   --chart oci://REGISTRY/charts/mydatabase --chart-version VERSION --chart-plain-http
# Pushing a version that is already there is harmless (same content, same
# digest) and takes well under a second, so every run simply pushes.
set -euo pipefail
# A failing command inside $(...) must stop the script too.
shopt -s inherit_errexit

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHARTS=(mydatabase mydatabase-operator)

usage() { echo "usage: $0 REGISTRY   (127.0.0.1:PORT or localhost:PORT, a registry over plain HTTP)" >&2; exit 2; }

[[ $# -eq 1 ]] || usage
REGISTRY="$1"
# Plain HTTP is only ever right on the loopback interface.
if [[ ! "${REGISTRY}" =~ ^(127\.0\.0\.1|localhost):([0-9]{1,5})$ ]] \
   || (( 10#${BASH_REMATCH[2]} < 1 || 10#${BASH_REMATCH[2]} > 65535 )); then
  echo "publish-charts: refusing registry '${REGISTRY}': only 127.0.0.1:PORT or localhost:PORT (pushed over plain HTTP)" >&2
  exit 2
fi

HELM="$(bash "${REPO}/hack/build-tools.sh" | tail -1)/helm"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT

for chart in "${CHARTS[@]}"; do
  out="${WORK}/${chart}"
  mkdir -p "${out}"
  if ! "${HELM}" package "${REPO}/charts/${chart}" --destination "${out}" >"${WORK}/helm.log" 2>&1; then
    echo "publish-charts: helm package charts/${chart} failed:" >&2
    cat "${WORK}/helm.log" >&2
    exit 1
  fi
  packages=("${out}"/*.tgz)
  if [[ ${#packages[@]} -ne 1 || ! -f "${packages[0]}" ]]; then
    echo "publish-charts: helm package charts/${chart} left no single .tgz in ${out}" >&2
    exit 1
  fi
  if ! "${HELM}" push "${packages[0]}" "oci://${REGISTRY}/charts" --plain-http >"${WORK}/helm.log" 2>&1; then
    echo "publish-charts: helm push of charts/${chart} to oci://${REGISTRY}/charts failed:" >&2
    cat "${WORK}/helm.log" >&2
    exit 1
  fi
  # Helm names what it pushed: "Pushed: REGISTRY/charts/NAME:VERSION".
  pushed="$(sed -n 's/^Pushed: //p' "${WORK}/helm.log" | head -1)"
  if [[ -z "${pushed}" ]]; then
    echo "publish-charts: helm push of charts/${chart} did not say what it pushed:" >&2
    cat "${WORK}/helm.log" >&2
    exit 1
  fi
  echo "charts: pushed oci://${pushed}"
done
