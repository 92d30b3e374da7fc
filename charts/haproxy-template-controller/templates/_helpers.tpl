{{- define "htc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "htc.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* The HAProxy pods of the fleet topology: what `htc run --haproxy-selector` finds. */}}
{{- define "htc.haproxySelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: haproxy
{{- end -}}

{{- define "htc.haproxySelector" -}}
{{- $parts := list -}}
{{- range $k, $v := (include "htc.haproxySelectorLabels" . | fromYaml) -}}
{{- $parts = append $parts (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* Where HAProxy serves traffic: the controller pods (embedded) or the HAProxy pods (fleet). */}}
{{- define "htc.trafficSelectorLabels" -}}
{{- if eq .Values.topology "fleet" -}}{{ include "htc.haproxySelectorLabels" . }}{{- else -}}{{ include "htc.selectorLabels" . }}{{- end -}}
{{- end -}}

{{/* The Secret with the Data Plane API's username and password (keys username, password). */}}
{{- define "htc.dataplaneSecret" -}}
{{- .Values.fleet.credentials.existingSecret | default (printf "%s-dataplane" (include "htc.fullname" .)) -}}
{{- end -}}

{{- define "htc.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "htc.serviceAccount" -}}{{ include "htc.fullname" . }}{{- end -}}
{{- define "htc.tlsSecret" -}}
{{- if eq .Values.webhook.tls.mode "secret" -}}{{ required "webhook.tls.secretName is required with mode secret" .Values.webhook.tls.secretName }}{{- else -}}{{ include "htc.fullname" . }}-webhook-tls{{- end -}}
{{- end -}}

{{/* The HAProxyTemplateConfig spec: values, or the quickstart library shipped in files/. */}}
{{- define "htc.configSpec" -}}
{{- if .Values.config.spec -}}
{{- toYaml .Values.config.spec -}}
{{- else -}}
{{- toYaml (.Files.Get "files/config.yaml" | fromYaml).spec -}}
{{- end -}}
{{- end -}}

{{/* The resource name of a kind, as controller/spec/webhook_config.py plural_of derives it. */}}
{{- define "htc.plural" -}}
{{- $l := lower . -}}
{{- if or (hasSuffix "s" $l) (hasSuffix "x" $l) (hasSuffix "z" $l) (hasSuffix "ch" $l) (hasSuffix "sh" $l) -}}
{{- printf "%ses" $l -}}
{{- else if and (hasSuffix "y" $l) (not (regexMatch "[aeiou]y$" $l)) -}}
{{- printf "%sies" (trimSuffix "y" $l) -}}
{{- else -}}
{{- printf "%ss" $l -}}
{{- end -}}
{{- end -}}

{{/* Every container: restricted Pod Security, read-only root, writes only to its volumes. */}}
{{- define "htc.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities: {drop: [ALL]}
{{- end -}}
