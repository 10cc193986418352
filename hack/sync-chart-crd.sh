#!/usr/bin/env bash
# crds/ is the single source of the MyDatabase CRD. The operator chart templates
# it (templates/crd.yaml, so that `helm upgrade` upgrades it too, which Helm's
# crds/ folder never does), and a chart can only read files inside itself: this
# copies the CRD into charts/mydatabase-operator/files/.
#
#   hack/sync-chart-crd.sh           copy crds/ into the chart
#   hack/sync-chart-crd.sh --check   exit 1 if the chart's copy differs (CI, tests)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="${REPO}/crds/mydatabases.myapp.example.com.yaml"
DEST="${REPO}/charts/mydatabase-operator/files/mydatabases.myapp.example.com.yaml"

case "${1:-}" in
  --check)
    if ! cmp -s "${SRC}" "${DEST}"; then
      echo "charts/mydatabase-operator/files/ is out of date with crds/: run hack/sync-chart-crd.sh (make chart-crd)" >&2
      exit 1
    fi
    ;;
  "")
    mkdir -p "$(dirname "${DEST}")"
    cp "${SRC}" "${DEST}"
    echo "copied crds/$(basename "${SRC}") into charts/mydatabase-operator/files/"
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
