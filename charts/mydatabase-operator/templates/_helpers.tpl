{{- define "mydatabase-operator.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mydatabase-operator.serviceAccountName" -}}
{{- default (include "mydatabase-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Selector labels: name + instance only, never a label that changes on upgrade. */}}
{{- define "mydatabase-operator.selectorLabels" -}}
app.kubernetes.io/name: mydatabase-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mydatabase-operator.labels" -}}
{{ include "mydatabase-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/part-of: mydatabase-operator
{{- end -}}

{{/* The operator's rights, shared by the ClusterRole and the per-namespace Roles. */}}
{{- define "mydatabase-operator.namespacedRules" -}}
- apiGroups: [myapp.example.com]
  resources: [mydatabases]
  verbs: [get, list, watch, patch, update]
- apiGroups: [myapp.example.com]
  resources: [mydatabases/status]
  verbs: [get, patch, update]
# Events on MyDatabases say what the operator did.
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# What the bundled chart renders, applied by Helm. ConfigMaps also hold Helm's
# release records (HELM_DRIVER=configmap), so no Secret is ever listed or read.
- apiGroups: [""]
  resources: [services, configmaps, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, patch, delete]
# Deleting a MyDatabase whose objects it owns deletes the release's records in
# one request (label selector owner=helm,name=RELEASE) instead of a helm uninstall.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [deletecollection]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, update, patch, delete]
# Backup Jobs are watched for results; an on-demand backup (annotation
# myapp.example.com/backup-now) is one Job made from the CronJob's template.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create]
# Pods are watched for status and labelled with their role (primary, replica,
# fenced); deleted one at a time to restart them onto a new template (replicas
# first, the primary after a switchover), and a fenced former primary to stop it.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
# Where the Services route: Ready waits until a client lands on the right pods.
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
# The credentials Secret is created once and deleted with deletionPolicy Delete;
# get reads the superuser's login from it (the operator asks each server what
# it is, and promotes a replica) and checks the keys of a Secret a MyDatabase
# names. update: the database's CA and server certificate (NAME-ca, NAME-tls)
# are issued again before they expire. Never list or watch: Helm keeps its
# records in ConfigMaps.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, update, delete]
# The primary lease: the operator names the primary in it (a failover waits
# until the old primary can no longer renew it), and the chart gives each
# database's pods a ServiceAccount and a Role to read and renew that Lease
# alone (Kubernetes lets the operator grant only rights it holds itself).
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update, patch, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, update, patch, delete]
{{- end -}}
