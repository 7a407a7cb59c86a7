{{/*
Names and labels: the same as upstream's chart, so objects keep their names when a release
moves from upstream Karpenter to karpenter-rs.
*/}}
{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it contains the chart name, else
<release>-<chart>; truncated at 63 characters (DNS label limit).
*/}}
{{- define "karpenter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "karpenter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpenter.labels" -}}
helm.sh/chart: {{ include "karpenter.chart" . }}
{{ include "karpenter.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
metadata.annotations from additionalAnnotations (nothing when empty).
*/}}
{{- define "karpenter.annotations" -}}
{{- with .Values.additionalAnnotations -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
repository:tag[@digest]; the tag defaults to the chart's appVersion.
*/}}
{{- define "karpenter.controller.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag }}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository $tag .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "karpenter.controller.containerName" -}}
{{- .Values.controller.containerName | default "controller" -}}
{{- end -}}

{{/*
Adds a labelSelector (matchLabels: the selector labels) to ._target when it has none. Helm
dictionaries are passed by reference, so the caller's values are patched in place.
*/}}
{{- define "karpenter.patchLabelSelector" -}}
{{- if not (hasKey ._target "labelSelector") }}
{{- $selectorLabels := (include "karpenter.selectorLabels" .) | fromYaml }}
{{- $_ := set ._target "labelSelector" (dict "matchLabels" $selectorLabels) }}
{{- end }}
{{- end }}

{{- define "karpenter.patchPodAffinity" -}}
{{- range $term := (._podAffinity.requiredDuringSchedulingIgnoredDuringExecution | default list) }}
{{- include "karpenter.patchLabelSelector" (merge (dict "_target" $term) $) }}
{{- end }}
{{- range $weighted := (._podAffinity.preferredDuringSchedulingIgnoredDuringExecution | default list) }}
{{- include "karpenter.patchLabelSelector" (merge (dict "_target" $weighted.podAffinityTerm) $) }}
{{- end }}
{{- end }}

{{- define "karpenter.patchAffinity" -}}
{{- with .Values.affinity.podAffinity }}
{{- include "karpenter.patchPodAffinity" (merge (dict "_podAffinity" .) $) }}
{{- end }}
{{- with .Values.affinity.podAntiAffinity }}
{{- include "karpenter.patchPodAffinity" (merge (dict "_podAffinity" .) $) }}
{{- end }}
{{- end }}

{{- define "karpenter.patchTopologySpreadConstraints" -}}
{{- range $constraint := .Values.topologySpreadConstraints }}
{{- include "karpenter.patchLabelSelector" (merge (dict "_target" $constraint) $) }}
{{- end }}
{{- end }}

{{/*
One env entry NAME=value for a setting, or nothing when the value is unset (null or ""), so the
controller's default applies. Unlike upstream's `with`, false and 0 are rendered: upstream's
chart drops `ignoreDRARequests: false` (the controller then keeps its default, true).
Strings go through tpl, as upstream's do (e.g. clusterName: "{{ .Release.Name }}").
*/}}
{{- define "karpenter.settingEnv" -}}
{{- $value := .value }}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}
- name: {{ .name }}
  value: {{ tpl (toString $value) .root | quote }}
{{- end }}
{{- end }}

{{/*
The settings' env entries (upstream's names), one "- name/value" item each, at column 0.
*/}}
{{- define "karpenter.settingsEnv" -}}
{{- include "karpenter.settingEnv" (dict "name" "LOG_LEVEL" "value" .Values.logLevel "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "LOG_OUTPUT_PATHS" "value" (join "," (.Values.logOutputPaths | default list)) "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "LOG_ERROR_OUTPUT_PATHS" "value" (join "," (.Values.logErrorOutputPaths | default list)) "root" $) }}
{{- with .Values.settings.featureGates }}
- name: FEATURE_GATES
  value: "NodeRepair={{ .nodeRepair }},ReservedCapacity={{ .reservedCapacity }},SpotToSpotConsolidation={{ .spotToSpotConsolidation }},NodeOverlay={{ .nodeOverlay }},StaticCapacity={{ .staticCapacity }},CapacityBuffer={{ .capacityBuffer }},TerminateFirstDrift={{ .terminateFirstDrift }},TerminateFirstRepair={{ .terminateFirstRepair }},PodDeletionCostManagement={{ .podDeletionCostManagement }}"
{{- end }}
{{- with .Values.settings }}
{{- include "karpenter.settingEnv" (dict "name" "BATCH_MAX_DURATION" "value" .batchMaxDuration "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "BATCH_IDLE_DURATION" "value" .batchIdleDuration "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "PREFERENCE_POLICY" "value" .preferencePolicy "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "MIN_VALUES_POLICY" "value" .minValuesPolicy "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "IGNORE_DRA_REQUESTS" "value" .ignoreDRARequests "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "LEGACY_NODE_REPAIR" "value" .legacyNodeRepair "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "DISABLE_CLUSTER_STATE_OBSERVABILITY" "value" .disableClusterStateObservability "root" $) }}
# The AWS provider's settings (upstream's names; read once --cloud-provider=aws is
# implemented).
- name: CLUSTER_NAME
  value: {{ required "Chart cannot be installed without a valid settings.clusterName!" (tpl (toString .clusterName) $) | quote }}
{{- include "karpenter.settingEnv" (dict "name" "CLUSTER_ENDPOINT" "value" .clusterEndpoint "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "CLUSTER_CA_BUNDLE" "value" .clusterCABundle "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "INTERRUPTION_QUEUE" "value" .interruptionQueue "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "ISOLATED_VPC" "value" .isolatedVPC "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "EKS_CONTROL_PLANE" "value" .eksControlPlane "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "VM_MEMORY_OVERHEAD_PERCENT" "value" .vmMemoryOverheadPercent "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "ENABLE_ZONAL_SHIFT" "value" .enableZonalShift "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "RESERVED_ENIS" "value" .reservedENIs "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "DISABLE_DRY_RUN" "value" .disableDryRun "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "AMI_REFRESH_INTERVAL" "value" .amiRefreshInterval "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "SUBNET_REFRESH_INTERVAL" "value" .subnetRefreshInterval "root" $) }}
{{- include "karpenter.settingEnv" (dict "name" "SECURITY_GROUP_REFRESH_INTERVAL" "value" .securityGroupRefreshInterval "root" $) }}
{{- with .awsFeatureGates }}
- name: AWS_FEATURE_GATES
  value: "NodeClassCEL={{ .nodeClassCEL }},RebootForRepair={{ .rebootForRepair }}"
{{- end }}
{{- end }}
{{- end }}
