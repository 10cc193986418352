#!/usr/bin/env bash
# The operator's main job, end to end on the local control plane: start the
# cluster if needed, install the CRD and RBAC, run the operator under its own
# ServiceAccount, apply the seed MyDatabase and watch it become Ready.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_DIR="${MYDB_CLUSTER_DIR:-${REPO}/.cluster}"
PY="${REPO}/.venv/bin/python"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "local control plane (first run builds Kubernetes from source: many minutes)"
python3 "${REPO}/hack/cluster.py" up >/dev/null
BIN="$(bash "${REPO}/hack/build-tools.sh" | tail -1)"
export KUBECONFIG="${CLUSTER_DIR}/admin.kubeconfig" PATH="${BIN}:${PATH}"
kubectl get nodes

step "CRD, RBAC and a ServiceAccount kubeconfig for the operator"
bash "${REPO}/hack/install-dev.sh" "${CLUSTER_DIR}/operator.kubeconfig"

step "operator (under ServiceAccount mydb-system/mydb-operator; log: ${CLUSTER_DIR}/logs/operator.log)"
PID_FILE="${CLUSTER_DIR}/state/pids/mydb-operator.pid"
if [[ -f "${PID_FILE}" ]] && tr '\0' ' ' < "/proc/$(cat "${PID_FILE}")/cmdline" 2>/dev/null | grep -q mydb_operator.cli; then
  echo "already running (pid $(cat "${PID_FILE}"))"
else
  KUBECONFIG="${CLUSTER_DIR}/operator.kubeconfig" MYDB_HELM="${BIN}/helm" HELM_DRIVER=configmap \
    nohup "${PY}" -m mydb_operator.cli run --health-port 0 >> "${CLUSTER_DIR}/logs/operator.log" 2>&1 &
  echo $! > "${PID_FILE}"
  echo "started (pid $!)"
fi

step "kubectl apply -f examples/production-db.yaml (the seed CR, verbatim)"
kubectl apply -f "${REPO}/examples/production-db.yaml"
kubectl get mydb production-db
for _ in $(seq 1 60); do
  sleep 2
  kubectl get mydb production-db --no-headers
  if [[ "$(kubectl get mydb production-db -o jsonpath='{.status.ready}')" == "true" ]]; then break; fi
done
kubectl wait --for=condition=Ready mydb/production-db --timeout=60s

step "what the operator made"
kubectl get mydb production-db
kubectl get statefulset,pods,svc,pvc,cronjob -l app.kubernetes.io/instance=production-db -L myapp.example.com/role
kubectl get mydb production-db -o jsonpath='{.status.conditions}' | "${PY}" -m json.tool

cat <<EOM

production-db is Ready. Try:
  export KUBECONFIG=${KUBECONFIG} PATH=${BIN}:\$PATH
  kubectl scale mydb/production-db --replicas=5 && kubectl get mydb -w
  kubectl delete mydb production-db      # PVCs and the credentials Secret are kept (deletionPolicy Retain)
  make cluster-down                      # stops the operator and the control plane
EOM
