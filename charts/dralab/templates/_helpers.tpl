{{/* Names: "<release>" when it already contains "dralab", else "<release>-dralab" (63 chars at most). */}}
{{- define "dralab.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dralab.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: dralab
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "webhook"). */}}
{{- define "dralab.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dralab.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dralab.webhookName" -}}{{ include "dralab.fullname" . }}-webhook{{- end -}}
{{- define "dralab.driverName" -}}{{ include "dralab.fullname" . }}-driver{{- end -}}
{{- define "dralab.configName" -}}{{ include "dralab.fullname" . }}-config{{- end -}}
{{- define "dralab.certName" -}}{{ include "dralab.fullname" . }}-webhook-tls{{- end -}}

{{/* The host path of the enforcement library the driver puts into CDI specs. */}}
{{- define "dralab.enforcementLibrary" -}}
{{- if .Values.driver.enforcementLibrary -}}
{{- .Values.driver.enforcementLibrary -}}
{{- else -}}
{{- printf "%s/libvcore.so" (trimSuffix "/" .Values.driver.enforcementLibraryDir) -}}
{{- end -}}
{{- end -}}

{{/*
dralab's one config file (dralab/config.py), built from the values that map onto it.
dralab.provision.chart.config_from_values is the same mapping in Python; tests keep them equal.
*/}}
{{- define "dralab.config" -}}
{{- $v := .Values -}}
{{- $vendors := dict "enabled" $v.vendors.enabled "overrides" ($v.vendors.overrides | default dict) -}}
{{- $webhook := dict
      "lifecycle" $v.webhook.lifecycle
      "claimGracePeriodSeconds" (int $v.webhook.claimGracePeriodSeconds)
      "excludeNamespaces" $v.webhook.excludeNamespaces
      "optOutLabel" $v.webhook.optOutLabel
      "failurePolicy" $v.webhook.failurePolicy
      "namespaceSelector" ($v.webhook.namespaceSelector | default dict)
      "objectSelector" ($v.webhook.objectSelector | default dict) -}}
{{- $driver := dict
      "backend" $v.driver.backend
      "cdiDir" $v.driver.cdiDir
      "pluginDir" $v.driver.pluginDir
      "registryDir" $v.driver.registryDir
      "stateDir" $v.driver.stateDir
      "enforcementLibrary" (include "dralab.enforcementLibrary" .)
      "injectDeviceNodes" $v.driver.injectDeviceNodes -}}
{{- toYaml (dict "vendors" $vendors "webhook" $webhook "driver" $driver) -}}
{{- end -}}

{{/* Checks the schema cannot express; each failure says what to change. */}}
{{- define "dralab.validate" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.certManager.enabled) (not .Values.webhook.tls.secretName) -}}
{{- fail "webhook.certManager.enabled is false: set webhook.tls.secretName (a kubernetes.io/tls Secret) and webhook.tls.caBundle" -}}
{{- end -}}
{{- $table := (.Files.Get "files/vendors.yaml" | fromYaml).vendors -}}
{{- range .Values.vendors.enabled -}}
{{- if not (or (hasKey $table .) (hasKey (default dict $.Values.vendors.overrides) .)) -}}
{{- fail (printf "vendors.enabled names %q, which is neither a shipped vendor (%s) nor in vendors.overrides" . (keys $table | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Which pods the webhooks see: not the excluded namespaces (plus this release's own), not a
namespace or pod labelled <optOutLabel>=false. Same rules as dralab.webhook.registration.
*/}}
{{- define "dralab.namespaceSelector" -}}
{{- $extra := .Values.webhook.namespaceSelector | default dict -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ concat .Values.webhook.excludeNamespaces (list "kube-system" .Release.Namespace) | uniq | sortAlpha | toJson }}
  - key: {{ .Values.webhook.optOutLabel }}
    operator: NotIn
    values: ["false"]
{{- range $extra.matchExpressions }}
  - {{ toJson . }}
{{- end }}
{{- with $extra.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "dralab.objectSelector" -}}
{{- $extra := .Values.webhook.objectSelector | default dict -}}
matchExpressions:
  - key: {{ .Values.webhook.optOutLabel }}
    operator: NotIn
    values: ["false"]
{{- range $extra.matchExpressions }}
  - {{ toJson . }}
{{- end }}
{{- with $extra.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "dralab.webhookClientConfig" -}}
service:
  name: {{ include "dralab.webhookName" .ctx }}
  namespace: {{ .ctx.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- if and (not .ctx.Values.webhook.certManager.enabled) .ctx.Values.webhook.tls.caBundle }}
caBundle: {{ .ctx.Values.webhook.tls.caBundle }}
{{- end }}
{{- end -}}
