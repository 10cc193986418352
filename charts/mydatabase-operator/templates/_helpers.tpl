{{- define "mydatabase-operator.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mydatabase-operator.serviceAccountName" -}}
{{- default (include "mydatabase-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "mydatabase-operator.labels" -}}
app.kubernetes.io/name: mydatabase-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
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
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch]
# Pods are watched for status and labelled with their role (primary/replica).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch]
# The credentials Secret is created once and deleted with deletionPolicy Delete; never read.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, delete]
{{- end -}}
