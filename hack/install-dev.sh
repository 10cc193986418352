#!/usr/bin/env bash
# Installs what the operator needs on the local control plane, the way a
# platform team would: the CRD from crds/ and the ServiceAccount and RBAC from
# charts/mydatabase-operator (its Deployment off: the operator runs here as a
# local process; its CRD copy off: crds/ is applied directly; leader election
# on: the operator elects by default, so it needs the Lease Role in mydb-system
# (run it with --leader-lease-namespace mydb-system: the minted kubeconfig names
# no namespace) and the cluster-wide list of Leases for its overlap check). Then
# mints a kubeconfig for that ServiceAccount, so the operator runs with exactly
# the rights the chart grants.
#
#   hack/install-dev.sh OUT_KUBECONFIG
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: install-dev.sh OUT_KUBECONFIG}"
BIN="$(bash "${REPO}/hack/build-tools.sh" | tail -1)"
CLUSTER_DIR="${MYDB_CLUSTER_DIR:-${REPO}/.cluster}"
export KUBECONFIG="${CLUSTER_DIR}/admin.kubeconfig"
NS=mydb-system
SA=mydb-operator

# --force-conflicts: crds/ wins over an earlier manager of the CRD's fields (an
# operator chart release, as tests/e2e/test_rbac.py installs one).
"${BIN}/kubectl" apply --server-side --force-conflicts -f "${REPO}/crds" >/dev/null
# kubectl wait fails at once, instead of waiting, while the new CRD has no conditions at all (its controller
# sets them a moment after the create): ask again after a second.
established() { "${BIN}/kubectl" wait --for=condition=Established crd/mydatabases.myapp.example.com --timeout=60s; }
established >/dev/null 2>&1 || { sleep 1; established >/dev/null; }
"${BIN}/kubectl" get namespace "${NS}" >/dev/null 2>&1 || "${BIN}/kubectl" create namespace "${NS}" >/dev/null
"${BIN}/helm" template "${SA}" "${REPO}/charts/mydatabase-operator" --namespace "${NS}" \
  --set deployment.enabled=false --set crds.install=false --set leaderElection.enabled=true \
  | "${BIN}/kubectl" apply -f - >/dev/null
# The parallel tests give each worker's operator a pattern (-n 'gw0-*'), which kopf resolves by
# watching the namespaces: the one right the chart does not grant (docs/install.md, Settings).
"${BIN}/kubectl" apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ${SA}-namespace-patterns}
rules: [{apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ${SA}-namespace-patterns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${SA}-namespace-patterns}
subjects: [{kind: ServiceAccount, name: ${SA}, namespace: ${NS}}]
YAML
python3 "${REPO}/hack/cluster.py" sa-kubeconfig -n "${NS}" -s "${SA}" -o "${OUT}"
