{{/*
The chart's name, used in the app.kubernetes.io/name label and in selectors.
*/}}
{{- define "accurate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name. It follows the Go chart's rule (the release name when it
contains the chart's name, else "<release>-<chart>") so that upgrading a release made with the
Go chart updates the same objects instead of creating new ones next to them.
*/}}
{{- define "accurate.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Labels every object carries; Helm's bookkeeping, not something the controller reads.
*/}}
{{- define "accurate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "accurate.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that pick the controller's Pods: the Deployment's selector (which cannot change once
created, and is the Go chart's) and the webhook Service's.
*/}}
{{- define "accurate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "accurate.name" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/*
The ServiceAccount the controller runs as, named in every binding.
*/}}
{{- define "accurate.serviceAccount" -}}
- kind: ServiceAccount
  name: {{ include "accurate.fullname" . }}-controller-manager
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The webhook Service, as the webhook configurations and the CRD's conversion name it.
*/}}
{{- define "accurate.webhookService" -}}
name: {{ include "accurate.fullname" . }}-webhook-service
namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The annotation by which cert-manager's cainjector puts the serving certificate's CA into the
webhook configurations and the CRD.
*/}}
{{- define "accurate.injectCA" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "accurate.fullname" . }}-serving-cert
{{- end }}

{{/*
Values of the Go chart's that this chart cannot honour: fail with what to do rather than do
something else quietly.
*/}}
{{- define "accurate.refuseUnsupported" -}}
{{- if (index .Values "cert-manager" | default dict).enabled }}
{{- fail "cert-manager.enabled: this chart does not install cert-manager. Install cert-manager on its own first (a release made with an older Go chart that installed it would remove it on upgrade), then drop the cert-manager key from your values" }}
{{- end }}
{{- end }}
