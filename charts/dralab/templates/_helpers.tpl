{{/* The chart's name: nameOverride, else "dralab". */}}
{{- define "dralab.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Names of the objects: fullnameOverride, else "<release>" when it already contains the name, else
"<release>-<name>". 55 characters at most: suffixes such as "-webhook-tls" follow.
*/}}
{{- define "dralab.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "dralab.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The standard labels of every object the chart renders. */}}
{{- define "dralab.labels" -}}
app.kubernetes.io/name: {{ include "dralab.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dralab
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "webhook"). */}}
{{- define "dralab.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dralab.name" .ctx }}
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

{{/*
ServiceAccounts: one per component, so each is bound to its own ClusterRole only. They are named
"<base>-webhook" and "<base>-driver", where <base> is serviceAccount.name or the fullname; with
serviceAccount.create=false the chart creates neither and binds these names (create them first).
*/}}
{{- define "dralab.serviceAccountBase" -}}{{ default (include "dralab.fullname" .) .Values.serviceAccount.name }}{{- end -}}
{{- define "dralab.webhookServiceAccount" -}}{{ include "dralab.serviceAccountBase" . }}-webhook{{- end -}}
{{- define "dralab.driverServiceAccount" -}}{{ include "dralab.serviceAccountBase" . }}-driver{{- end -}}

{{/* The host path of the enforcement library the driver puts into CDI specs. */}}
{{- define "dralab.enforcementLibrary" -}}
{{- if .Values.driver.enforcementLibrary -}}
{{- .Values.driver.enforcementLibrary -}}
{{- else -}}
{{- printf "%s/libvcore.so" (trimSuffix "/" .Values.driver.enforcementLibraryDir) -}}
{{- end -}}
{{- end -}}

{{/*
"true" unless metrics.authorization is false: /metrics of the webhook, driver and monitor answer only
callers the cluster authorizes (TokenReview + SubjectAccessReview, dralab/kube/authz.py).
*/}}
{{- define "dralab.metricsAuthorization" -}}
{{- $m := .Values.metrics | default dict -}}
{{- if and (hasKey $m "authorization") (eq (toString $m.authorization) "false") }}false{{ else }}true{{ end -}}
{{- end -}}

{{/*
How a ServiceMonitor endpoint authenticates while metrics.authorization is on: Prometheus's own
service account token, or metrics.serviceMonitor.authorization (a token from a Secret). Empty when off.
*/}}
{{- define "dralab.scrapeAuthorization" -}}
{{- if eq (include "dralab.metricsAuthorization" .) "true" -}}
{{- with (.Values.metrics.serviceMonitor.authorization | default dict) -}}
authorization:
  {{- toYaml . | nindent 2 }}
{{- else -}}
bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The monitor's serving certificate Secret while monitor.tls.enabled: monitor.tls.secretName, else the
one cert-manager issues for it (monitor.yaml).
*/}}
{{- define "dralab.monitorTLSSecret" -}}
{{- $tls := (.Values.monitor | default dict).tls | default dict -}}
{{- $tls.secretName | default (printf "%s-monitor-tls" (include "dralab.fullname" .)) -}}
{{- end -}}

{{/*
dralab's one config file (dralab/config.py), built from the values that map onto it.
dralab_kit.provision.chart.config_from_values is the same mapping in Python; tests keep them equal.
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
      "objectSelector" ($v.webhook.objectSelector | default dict)
      "maxClaimsPerPod" (int $v.webhook.maxClaimsPerPod)
      "claimCreateRatePerSecond" $v.webhook.claimCreateRatePerSecond
      "claimCreateBurst" (int $v.webhook.claimCreateBurst)
      "admissionDeadlineSeconds" $v.webhook.admissionDeadlineSeconds -}}
{{- $driver := dict
      "backend" $v.driver.backend
      "cdiDir" $v.driver.cdiDir
      "pluginDir" $v.driver.pluginDir
      "registryDir" $v.driver.registryDir
      "stateDir" $v.driver.stateDir
      "enforcementLibrary" (include "dralab.enforcementLibrary" .)
      "enforcement" $v.driver.enforcement
      "injectDeviceNodes" $v.driver.injectDeviceNodes -}}
{{- $mig := $v.migration | default dict -}}
{{- $migration := dict
      "enabled" (or (and $mig.enabled true) (not (empty (include "dralab.hamiConfigMap" .))))
      "adoptClaims" $mig.adoptClaims
      "claimLabels" ($mig.claimLabels | default dict)
      "claimAnnotations" ($mig.claimAnnotations | default dict)
      "graceSeconds" (int ($mig.graceSeconds | default 30))
      "volcanoJobs" (and $mig.volcanoJobs true) -}}
{{- $_ := set $webhook "metricsAuthorization" (include "dralab.metricsAuthorization" . | eq "true") -}}
{{- $_ := set $driver "metricsAuthorization" (include "dralab.metricsAuthorization" . | eq "true") -}}
{{- toYaml (dict "vendors" $vendors "webhook" $webhook "driver" $driver "migration" $migration) -}}
{{- end -}}

{{/*
The ConfigMap holding HAMi's device config for --hami-config, as YAML {name, key}; empty without one:
migration.hamiConfig (text, rendered by hami-config.yaml) or migration.hamiConfigMap (an existing one).
*/}}
{{- define "dralab.hamiConfigMap" -}}
{{- $mig := .Values.migration | default dict -}}
{{- if $mig.hamiConfig -}}
{{- toYaml (dict "name" (printf "%s-hami-config" (include "dralab.fullname" .)) "key" "device-config.yaml") -}}
{{- else if ($mig.hamiConfigMap | default dict).name -}}
{{- toYaml (dict "name" $mig.hamiConfigMap.name "key" ($mig.hamiConfigMap.key | default "device-config.yaml")) -}}
{{- end -}}
{{- end -}}

{{/*
Which pods the webhooks see: not the excluded namespaces (plus this release's own), not a
namespace or pod labelled <optOutLabel>=false. Same rules as dralab.webhook.registration.
*/}}
{{/*
The webhooks' matchConditions: a pod is sent only when a container asks for a resource in a domain
(nvidia.com/, huawei.com/, ...) of an enabled vendor's HAMi resources. The same expression as
dralab.webhook.registration.match_expression; tests compare the two.
*/}}
{{- define "dralab.matchConditions" -}}
{{- $table := (.Files.Get "files/vendors.yaml" | fromYaml).vendors -}}
{{- $overrides := .Values.vendors.overrides | default dict -}}
{{- $domains := list -}}
{{- range .Values.vendors.enabled -}}
{{- $vendor := get $table . | default dict -}}
{{- $res := deepCopy ($vendor.resources | default dict) -}}
{{- $over := get $overrides . | default dict -}}
{{- $res = mergeOverwrite $res ($over.resources | default dict) -}}
{{- $names := list $res.count $res.memory $res.cores -}}
{{- $names = concat $names (keys ($res.unsupported | default dict)) ($res.ignored | default list) -}}
{{- range $names -}}
{{- $name := toString . -}}
{{- if contains "/" $name -}}
{{- $domains = append $domains (printf "%s/" (first (splitList "/" $name))) -}}
{{- else -}}
{{- $domains = append $domains $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $tests := list -}}
{{- range ($domains | uniq | sortAlpha) -}}
{{- $tests = append $tests (printf "k.startsWith(\"%s\")" .) -}}
{{- end -}}
{{- $test := join " || " $tests | default "false" -}}
{{- if include "dralab.hamiConfigMap" . -}}
{{- /* a HAMi device config may rename resources into any domain: every domain-qualified resource counts */ -}}
{{- $test = "k.contains(\"/\")" -}}
{{- end }}
- name: requests-accelerators
  expression: {{ printf "(has(object.spec.initContainers) ? object.spec.containers + object.spec.initContainers : object.spec.containers).exists(c, has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, %s)) || (has(c.resources.requests) && c.resources.requests.exists(k, %s))))" $test $test | quote }}
{{- end -}}

{{- define "dralab.namespaceSelector" -}}
{{- $extra := .Values.webhook.namespaceSelector | default dict -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ concat .Values.webhook.excludeNamespaces (list "kube-system" "cert-manager" .Release.Namespace) | uniq | sortAlpha | toJson }}
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

{{/*
The DeviceClass of an admin-access claim: (dict "ctx" $ "device" <monitor.adminAccess.device or
diagnostics.device>). device.deviceClassName, else the class of device.vendor (default: the first
of vendors.enabled), with vendors.overrides applied. Empty when neither resolves (validate.yaml
fails then, naming the value).
*/}}
{{- define "dralab.adminDeviceClass" -}}
{{- $d := .device | default dict -}}
{{- if $d.deviceClassName -}}
{{- $d.deviceClassName -}}
{{- else -}}
{{- $v := .ctx.Values.vendors -}}
{{- $key := toString ($d.vendor | default (first ($v.enabled | default list)) | default "") -}}
{{- if has $key ($v.enabled | default list) -}}
{{- $table := (.ctx.Files.Get "files/vendors.yaml" | fromYaml).vendors -}}
{{- $entry := mergeOverwrite (deepCopy (get $table $key | default dict)) (pick (get ($v.overrides | default dict) $key | default dict) "deviceClass") -}}
{{- $entry.deviceClass | default "" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A ResourceClaimTemplate whose one request "devices" has adminAccess: (dict "ctx" $ "name" <name>
"component" <component> "device" <device values>). Its claims are allocated devices tenants use
and take none of their capacity; the apiserver admits it only in a namespace labelled
resource.kubernetes.io/admin-access: "true" (validate.yaml checks that at install). The request
asks for device.capacityRequests (zero memory and cores by default): Kubernetes 1.35 to 1.37 still
check an admin request's capacity on a device with allowMultipleAllocations, and a request without
capacity would get the request policy's default, the whole device.
*/}}
{{- define "dralab.adminClaimTemplate" -}}
{{- $d := .device | default dict -}}
{{- $mode := $d.allocationMode | default "All" -}}
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {{ .name }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "dralab.labels" .ctx | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  metadata:
    labels:
      {{- include "dralab.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
  spec:
    devices:
      requests:
        - name: devices
          exactly:
            deviceClassName: {{ include "dralab.adminDeviceClass" (dict "ctx" .ctx "device" $d) | quote }}
            allocationMode: {{ $mode }}
            {{- if eq $mode "ExactCount" }}
            count: {{ int ($d.count | default 1) }}
            {{- end }}
            adminAccess: true
            {{- with $d.capacityRequests }}
            capacity:
              requests:
                {{- range $name, $value := . }}
                {{ $name }}: {{ toString $value | quote }}
                {{- end }}
            {{- end }}
            {{- with $d.selectors }}
            selectors:
              {{- range . }}
              - cel:
                  expression: {{ . | quote }}
              {{- end }}
            {{- end }}
{{- end -}}
