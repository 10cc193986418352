#!/usr/bin/env bash
# The operator's main job, end to end on the local cluster, on real pods:
# start the cluster (its real node, registry and images included), publish
# the charts to the local registry, install the operator in the cluster from
# its OCI chart and its image, apply the seed MyDatabase verbatim, watch it
# become Ready, then use PostgreSQL: write through the read-write Service,
# read back through the read-only Service, and show the replication.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_DIR="${MYDB_CLUSTER_DIR:-${REPO}/.cluster}"
REGISTRY="127.0.0.1:${MYDB_CLUSTER_PORT_BASE:-16400}"
RELEASE=mydatabase-operator
OPERATOR_NS=mydb-operator
CRD=mydatabases.myapp.example.com
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
START=${SECONDS}

step "local cluster with a real node (a first run builds Kubernetes and the images: many minutes)"
python3 "${REPO}/hack/cluster.py" up >/dev/null
BIN="$(bash "${REPO}/hack/build-tools.sh" | tail -1)"
export KUBECONFIG="${CLUSTER_DIR}/admin.kubeconfig" PATH="${BIN}:${PATH}"
kubectl get nodes -L node.mydb.local/real

step "images and charts in the local registry (images rebuilt only when their inputs changed)"
bash "${REPO}/hack/images.sh" push "${REGISTRY}" 2>&1 | grep -E 'pushed|built in' || true
bash "${REPO}/hack/publish-charts.sh" "${REGISTRY}"
CHART_VERSION="$(sed -n 's/^version: *//p' "${REPO}/charts/mydatabase-operator/Chart.yaml")"
APP_VERSION="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "${REPO}/pyproject.toml")"

step "operator in the cluster: helm upgrade --install ${RELEASE} oci://${REGISTRY}/charts/mydatabase-operator"
# Its pod and the databases it manages run on the real nodes (the platform
# config of examples/platform-local-node.yaml, pointed at this registry).
VALUES="$(mktemp)"
trap 'rm -f "${VALUES}"' EXIT
# crds/ may already be applied by hand (hack/install-dev.sh): then it stays
# theirs, and the release installs none.
CRDS=true
owner="$(kubectl get crd "${CRD}" -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}' 2>/dev/null || echo none)"
if [[ "${owner}" != none && "${owner}" != "${RELEASE}" ]]; then CRDS=false; fi
# The image's digest as a pod annotation: a rebuilt image keeps its version
# tag, and a changed annotation is what rolls the Deployment onto it.
IMAGE_DIGEST="$(curl -fsS --noproxy '*' -o /dev/null -D - \
  -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
  "http://${REGISTRY}/v2/mydb/mydatabase-operator/manifests/${APP_VERSION}" |
  tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p')"
# The operator chart's files, likewise: an edit without a version bump still rolls out.
CHART_DIGEST="$(cd "${REPO}" && git ls-files -co --exclude-standard charts/mydatabase-operator | sort |
  xargs sha256sum | sha256sum | cut -c1-16)"
"${REPO}/.venv/bin/python" - "${REPO}/examples/platform-local-node.yaml" "${REGISTRY}" "${APP_VERSION}" \
  "${IMAGE_DIGEST}" "${CHART_DIGEST}" "${CRDS}" >"${VALUES}" <<'EOF'
import sys, yaml
platform_file, registry, version, digest, chart_digest, crds = sys.argv[1:]
platform = yaml.safe_load(open(platform_file))
platform["values"]["image"]["registry"] = registry
real_node = {key: platform["values"][key] for key in ("nodeSelector", "tolerations")}
yaml.safe_dump({"image": {"repository": f"{registry}/mydb/mydatabase-operator", "tag": version,
                          "pullPolicy": "Always"},
                "podAnnotations": {"demo.mydb.local/image-digest": digest,
                                   "demo.mydb.local/chart-digest": chart_digest},
                "crds": {"install": crds == "true"},
                "watchNamespaces": ["default"], "platform": platform, **real_node}, sys.stdout)
EOF
# A second run with nothing changed leaves the release alone (no new revision).
if helm status "${RELEASE}" -n "${OPERATOR_NS}" >/dev/null 2>&1 &&
   "${REPO}/.venv/bin/python" - "${VALUES}" "${RELEASE}-${CHART_VERSION}" \
     <(helm get values "${RELEASE}" -n "${OPERATOR_NS}" -o json) \
     <(helm list -n "${OPERATOR_NS}" -f "^${RELEASE}\$" -o json) <<'EOF'
import json, sys, yaml
wanted, chart, deployed, listed = sys.argv[1:]
release = json.load(open(listed))
same = yaml.safe_load(open(wanted)) == json.load(open(deployed))
sys.exit(0 if same and release and release[0]["chart"] == chart and release[0]["status"] == "deployed" else 1)
EOF
then
  echo "release ${OPERATOR_NS}/${RELEASE} is up to date (same chart, values and image): left as it is"
else
  helm upgrade --install "${RELEASE}" "oci://${REGISTRY}/charts/mydatabase-operator" --version "${CHART_VERSION}" \
    --plain-http --namespace "${OPERATOR_NS}" --create-namespace -f "${VALUES}" --wait --timeout 5m >/dev/null
fi
kubectl -n "${OPERATOR_NS}" get deploy,pods -o wide

step "kubectl apply -f examples/production-db.yaml (the seed CR, verbatim)"
APPLIED=${SECONDS}
kubectl apply -f "${REPO}/examples/production-db.yaml"
for _ in $(seq 1 150); do
  kubectl get mydb production-db --no-headers
  if [[ "$(kubectl get mydb production-db -o jsonpath='{.status.ready}')" == "true" ]]; then break; fi
  sleep 2
done
kubectl wait --for=condition=Ready mydb/production-db --timeout=60s
echo "production-db Ready $(( SECONDS - APPLIED )) s after kubectl apply"

step "the database, its primary and the node it runs on (kubectl get mydb -o wide), and the real nodes"
kubectl get mydb production-db -o wide
kubectl get nodes -l node.mydb.local/real=true -o wide

step "what the operator made: one member on each real node"
kubectl get statefulset,pods,svc,pvc,cronjob -l app.kubernetes.io/instance=production-db -o wide \
  -L myapp.example.com/role

step "real PostgreSQL: the application's role writes a row through the read-write Service, reads it through the read-only one"
# The operator makes the role, its database and the Secret production-db-app once the primary answers.
for _ in $(seq 1 60); do
  [[ "$(kubectl get mydb production-db -o jsonpath='{.status.application.ready}')" == true ]] && break
  sleep 1
done
uri="$(kubectl get secret production-db-app -o jsonpath='{.data.uri}' | base64 -d)"
uri_ro="$(kubectl get secret production-db-app -o jsonpath='{.data.uri-ro}' | base64 -d)"
superuser="$(kubectl get secret production-db-credentials -o jsonpath='{.data.uri}' | base64 -d)"
# An operator just upgraded may still be rolling the pods onto its chart: retry
# while a pod restarts under the command.
psql_in() {
  local _
  for _ in $(seq 1 30); do
    # The URIs ask for verify-full: the pod's mounted CA, as a client's PGSSLROOTCERT.
    if kubectl exec "$1" -c postgres -- env PGSSLROOTCERT=/etc/mydatabase/tls/ca.crt \
      psql "$2" -v ON_ERROR_STOP=1 "${@:3}"; then return 0; fi
    echo "(${1} is not answering yet; trying again)" >&2
    sleep 2
    kubectl wait --for=condition=Ready mydb/production-db --timeout=120s >/dev/null
  done
  return 1
}
# The same row on every run: a second `make demo` changes nothing.
psql_in production-db-2 "${uri}" -qc "create table if not exists demo (id int primary key, said text, at timestamptz default now())" \
  -c "insert into demo (id, said) values (1, 'hello from the demo, through the read-write Service') on conflict (id) do nothing"
for _ in $(seq 1 20); do
  if [[ -n "$(psql_in production-db-2 "${uri_ro}" -Atc "select 1 from demo limit 1" 2>/dev/null)" ]]; then break; fi
  sleep 0.5
done
psql_in production-db-2 "${uri_ro}" -c "select id, said, current_user as role, current_database() as database, pg_is_in_recovery() as on_a_replica, inet_server_addr() as server from demo order by id desc limit 3"

# The primary is wherever the operator records it (ordinal 0 until a failover or a switchover).
primary="$(kubectl get mydb production-db -o jsonpath='{.status.primary}')"
step "pg_stat_replication on the primary (${primary}, through the read-write Service)"
psql_in "${primary}" "${superuser}" -c "select application_name, client_addr, state, sync_state, replay_lag from pg_stat_replication order by 1"
kubectl exec "${primary}" -c postgres -- postgres --version

step "the continuous WAL archive (pod production-db-wal-0): what the primary sees of it, and the recovery window"
# The first base backup starts once the database is Ready: the window opens when it ends.
for _ in $(seq 1 90); do
  [[ "$(kubectl get mydb production-db -o jsonpath='{.status.backup.archive.streaming}')" == true &&
     -n "$(kubectl get mydb production-db -o jsonpath='{.status.backup.firstRecoverablePoint}')" ]] && break
  sleep 1
done
kubectl get mydb production-db -o jsonpath='{"archive: "}{.status.backup.archive}{"\nfirst recoverable point: "}{.status.backup.firstRecoverablePoint}{"\n"}'

cat <<EOM

production-db is Ready on real pods ($(( SECONDS - START )) s for this run). Still running, until you stop them:
the local cluster in ${CLUSTER_DIR} (etcd, the API server, controllers, kwok nodes, three real nodes each
with its containerd, kubelet, kube-proxy and kube-router, CoreDNS and the registry on ${REGISTRY}), and in it
the operator Deployment ${OPERATOR_NS}/${RELEASE} and production-db's three PostgreSQL pods. Try:
  export KUBECONFIG=${KUBECONFIG} PATH=${BIN}:\$PATH
  kubectl exec -it production-db-0 -c postgres -- env PGSSLROOTCERT=/etc/mydatabase/tls/ca.crt \
    psql "\$(kubectl get secret production-db-app -o jsonpath='{.data.uri}' | base64 -d)"
  kubectl scale mydb/production-db --replicas=5 && kubectl get mydb -w
  kubectl -n ${OPERATOR_NS} logs deploy/${RELEASE}
  kubectl delete mydb production-db      # PVCs and the credentials Secret are kept (deletionPolicy Retain)
  python3 hack/cluster.py node lose 2    # a power cut of real node 2 (also freeze, cut, drain); node back 2 ends it
  # a copy of production-db as it was a minute ago (docs/backups.md):
  kubectl apply -f - <<<'{"apiVersion": "myapp.example.com/v1", "kind": "MyDatabase", "metadata": {"name": "copy"},
    "spec": {"replicas": 1, "version": "15.2", "storage": "1Gi",
             "restore": {"fromDatabase": "production-db", "pointInTime": "'"\$(date -u -d '1 minute ago' +%FT%TZ)"'"}}}'
To stop it:
  python3 hack/cluster.py stop           # pause: every process stops, the data stays; make demo resumes it
  make cluster-down                      # stop everything the demo started and remove its data (images stay cached)
make test runs on a cluster of its own; it pauses this one while it has the real nodes and resumes it after.
EOM
