{{/*
Names and labels shared by every template.
*/}}

{{/* app.kubernetes.io/name: the chart name unless nameOverride is set. */}}
{{- define "mydatabase.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Object name prefix: the release name (== the MyDatabase name) unless
fullnameOverride is set. Never truncated: the operator and PRIMARY_HOST rely on
exact names, so a name that is too long fails loudly instead. 52 characters is
the StatefulSet limit (its pods get a controller-revision-hash label
"<name>-<10 chars>", which must fit in 63).
*/}}
{{- define "mydatabase.fullname" -}}
{{- $name := default .Release.Name .Values.fullnameOverride -}}
{{- if gt (len $name) 52 -}}
{{- fail (printf "name %q is %d characters long; at most 52 are allowed (StatefulSet name limit)" $name (len $name)) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* helm.sh/chart label value. */}}
{{- define "mydatabase.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
app.kubernetes.io/version: the PostgreSQL image tag actually deployed, made a
valid label value (at most 63 characters, alphanumeric at both ends).
*/}}
{{- define "mydatabase.version" -}}
{{- regexReplaceAll "[^A-Za-z0-9]+$" (.Values.image.tag | trunc 63) "" -}}
{{- end -}}

{{/*
Selector labels: name + instance only. Selectors are immutable, so nothing that
can change (version, chart, component) belongs here.
*/}}
{{- define "mydatabase.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mydatabase.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{/*
Full label set for object metadata. Pass a dict: (dict "ctx" $ "component" "database").
*/}}
{{- define "mydatabase.labels" -}}
{{ include "mydatabase.selectorLabels" .ctx }}
app.kubernetes.io/version: {{ include "mydatabase.version" .ctx | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ include "mydatabase.chart" .ctx }}
{{- end -}}

{{/*
ownerReferences to the MyDatabase (the operator's `owner` value), for every
object except claims: deleting the MyDatabase then lets the garbage collector
remove them without a Helm run. Claims hold the data and outlive it unless
deletionPolicy says otherwise. No blockOwnerDeletion: nothing waits for them.
*/}}
{{- define "mydatabase.ownerReferences" -}}
{{- with .Values.owner -}}
{{- if .uid }}
ownerReferences:
  - apiVersion: {{ .apiVersion | quote }}
    kind: {{ .kind | quote }}
    name: {{ .name | quote }}
    uid: {{ .uid | quote }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Container image reference: [registry/]repository:tag[@digest]. With a
digest the runtime pulls exactly that image; the tag stays for people. */}}
{{- define "mydatabase.image" -}}
{{- $image := .Values.image -}}
{{- $ref := printf "%s:%s" $image.repository $image.tag -}}
{{- if $image.registry -}}
{{- $ref = printf "%s/%s" $image.registry $ref -}}
{{- end -}}
{{- if $image.digest -}}
{{- $ref = printf "%s@%s" $ref $image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/*
Container resources: the given ones, or the named preset when none are given.
Pass (dict "resources" .Values.resources "preset" .Values.resourcesPreset "kind" "database").
The presets are small on purpose (a namespace with a ResourceQuota accepts the
pods; a platform raises them): docs/configuration.md lists them. Ephemeral
storage covers the container's log (the kubelet keeps at most about 50Mi of
it) and the emptyDirs; the data and the dumps are on their own volumes.
*/}}
{{- define "mydatabase.resources" -}}
{{- $presets := dict
  "database" (dict
    "small" (dict "requests" (dict "cpu" "100m" "memory" "256Mi" "ephemeral-storage" "64Mi") "limits" (dict "cpu" "1" "memory" "1Gi" "ephemeral-storage" "1Gi"))
    "medium" (dict "requests" (dict "cpu" "500m" "memory" "1Gi" "ephemeral-storage" "64Mi") "limits" (dict "cpu" "2" "memory" "4Gi" "ephemeral-storage" "2Gi"))
    "large" (dict "requests" (dict "cpu" "2" "memory" "4Gi" "ephemeral-storage" "64Mi") "limits" (dict "cpu" "4" "memory" "16Gi" "ephemeral-storage" "4Gi")))
  "backup" (dict
    "small" (dict "requests" (dict "cpu" "50m" "memory" "64Mi" "ephemeral-storage" "16Mi") "limits" (dict "cpu" "500m" "memory" "512Mi" "ephemeral-storage" "256Mi"))
    "medium" (dict "requests" (dict "cpu" "250m" "memory" "256Mi" "ephemeral-storage" "16Mi") "limits" (dict "cpu" "1" "memory" "1Gi" "ephemeral-storage" "256Mi"))
    "large" (dict "requests" (dict "cpu" "1" "memory" "1Gi" "ephemeral-storage" "16Mi") "limits" (dict "cpu" "2" "memory" "4Gi" "ephemeral-storage" "256Mi"))) -}}
{{- if .resources -}}
{{- toYaml .resources -}}
{{- else if ne .preset "none" -}}
{{- toYaml (get (get $presets .kind) .preset) -}}
{{- end -}}
{{- end -}}

{{/* The credentials Secret's name; rendering fails without it. */}}
{{- define "mydatabase.secretName" -}}
{{- required "credentials.secretName is required: the name of an existing Secret with keys username, password, replication-username and replication-password (the operator creates it; the chart never does)" .Values.credentials.secretName -}}
{{- end -}}

{{/*
The PVC to restore from (restore.enabled only); rendering fails without it.
*/}}
{{- define "mydatabase.restoreClaim" -}}
{{- required "restore.claimName is required when restore.enabled is true: the source database's backups PersistentVolumeClaim in the same namespace (e.g. <source>-backups)" .Values.restore.claimName -}}
{{- end -}}

{{/* The pods' DNS domain (<pod>.<domain>) through the headless Service. */}}
{{- define "mydatabase.peerDomain" -}}
{{- $fullname := include "mydatabase.fullname" . -}}
{{- printf "%s-headless.%s.svc" $fullname .Release.Namespace -}}
{{- end -}}

{{/* The ConfigMap the operator records the primary in (it makes it; the chart only mounts it). */}}
{{- define "mydatabase.primaryRecord" -}}
{{- printf "%s-primary" (include "mydatabase.fullname" .) -}}
{{- end -}}

{{/* The primary lease (a Lease, beside the record of the same name), its ServiceAccount and Role. */}}
{{- define "mydatabase.primaryLease" -}}
{{- printf "%s-primary" (include "mydatabase.fullname" .) -}}
{{- end -}}

{{/*
The database containers' environment and mounts; (dict "ctx" . "firstBoot" true)
adds what only the first boot reads (the init container): what to restore.
*/}}
{{- define "mydatabase.databaseEnv" -}}
{{- $restore := .ctx.Values.restore | default dict -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: PGDATA
  value: /var/lib/postgresql/data/pgdata
- name: PGPORT
  value: {{ .ctx.Values.postgresql.port | quote }}
# The primary: the operator's record when there is one, else ordinal 0
# (role.sh); replicas reach it as <pod>.PEER_DOMAIN.
- name: PRIMARY_RECORD
  value: /etc/mydatabase/primary/primary
- name: PEER_DOMAIN
  value: {{ include "mydatabase.peerDomain" .ctx }}
# The Secret as files (the credentials volume), never as env vars:
# the environment is inherited by every process, PostgreSQL included.
- name: CREDENTIALS_DIR
  value: /etc/mydatabase/credentials
{{- if .ctx.Values.tls.enabled }}
# The server's certificate and key, and the CA replicas verify the primary with (entrypoint.sh).
- name: TLS_DIR
  value: /etc/mydatabase/tls
{{- end }}
{{- if and .firstBoot $restore.enabled }}
# Ordinal 0 restores this dump from RESTORE_DIR before it first serves
# (primary-init.sh); replicas clone the primary.
- name: RESTORE_FROM
  value: {{ $restore.backup | default "latest" | quote }}
- name: RESTORE_DIR
  value: /restore
{{- with $restore.pointInTime }}
# Recover from the source's continuous archive to this moment (recover.sh).
- name: RESTORE_TARGET_TIME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "mydatabase.databaseMounts" -}}
{{- $restore := .ctx.Values.restore | default dict -}}
- name: data
  mountPath: /var/lib/postgresql/data
- name: scripts
  mountPath: /scripts
  readOnly: true
- name: credentials
  mountPath: /etc/mydatabase/credentials
  readOnly: true
- name: primary-record
  mountPath: /etc/mydatabase/primary
  readOnly: true
{{- if .ctx.Values.tls.enabled }}
- name: tls
  mountPath: /etc/mydatabase/tls
  readOnly: true
{{- end }}
# Writable places under a read-only root filesystem: the unix
# socket and lock file, and temporary files of the scripts.
- name: run
  mountPath: /var/run/postgresql
- name: tmp
  mountPath: /tmp
{{- if and .firstBoot $restore.enabled }}
- name: restore-source
  mountPath: /restore
  readOnly: true
{{- end }}
{{- end -}}

{{/*
Restricted pod and container security contexts (Pod Security "restricted").
999 is the postgres user and group of the official image.
*/}}
{{- define "mydatabase.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
fsGroup: 999
# Do not chown a large data volume on every mount.
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "mydatabase.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
{{- end -}}

{{/*
Pull and node-placement settings shared by the database and backup pods.
affinity is left out on purpose and set on the database pods only: backup pods
carry the same name+instance labels, so an anti-affinity rule written for the
database pods would keep a backup pod off every node that runs one.
*/}}
{{- define "mydatabase.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The credentials Secret as files, readable by PostgreSQL's group (fsGroup) and
nobody else; the scripts copy what they need into private password files.
*/}}
{{/* The TLS Secret's name; rendering fails without it while TLS is on. */}}
{{- define "mydatabase.tlsSecretName" -}}
{{- required "tls.secretName is required while tls.enabled is true: the name of an existing Secret with keys tls.crt, tls.key and ca.crt (the operator creates it; the chart never does), or set tls.enabled=false" .Values.tls.secretName -}}
{{- end -}}

{{/*
The database pods' TLS volume: the server's key is readable by PostgreSQL's
group (fsGroup) and owned by root, which PostgreSQL accepts for a key file
(0640 or less). Mounted as it is, never copied: a renewed certificate reaches
the files without a restart, and a reload makes the server present it.
*/}}
{{- define "mydatabase.tlsVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "mydatabase.tlsSecretName" . | quote }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/*
Client pods (backups, the archive, helm test): only the CA, and libpq told to
verify the server's name against it.
*/}}
{{- define "mydatabase.clientTLSVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "mydatabase.tlsSecretName" . | quote }}
    defaultMode: 0444
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "mydatabase.clientTLSMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/mydatabase/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "mydatabase.clientTLSEnv" -}}
{{- if .Values.tls.enabled }}
- name: PGSSLMODE
  value: verify-full
- name: PGSSLROOTCERT
  value: /etc/mydatabase/tls/ca.crt
{{- end }}
{{- end -}}

{{- define "mydatabase.credentialsVolume" -}}
- name: credentials
  secret:
    secretName: {{ include "mydatabase.secretName" . | quote }}
    defaultMode: 0440
{{- end -}}

{{/*
The database pods' affinity: .Values.affinity when given, else the
podAntiAffinityPreset over the database pods on kubernetes.io/hostname: soft
(preferred: spread over nodes, yet a one-node cluster still runs them all),
hard (required: never two on one node) or none.
*/}}
{{- define "mydatabase.affinity" -}}
{{- if .Values.affinity -}}
{{- toYaml .Values.affinity -}}
{{- else if ne .Values.podAntiAffinityPreset "none" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (merge (include "mydatabase.selectorLabels" . | fromYaml) (dict "app.kubernetes.io/component" "database"))) -}}
{{- if eq .Values.podAntiAffinityPreset "hard" -}}
{{- toYaml (dict "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term))) -}}
{{- else -}}
{{- toYaml (dict "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term)))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
