{{/*
The files of deploy/ this release renders, in order; each is read through files/deploy (a link to
deploy/), so the chart and kustomize render the same objects and the same RBAC.
*/}}
{{- define "cloudzones.files" -}}
{{- $files := list "base/serviceaccounts.yaml" "base/rbac.yaml" -}}
{{- if .Values.controller.enabled }}{{ $files = append $files "base/controller.yaml" }}{{ end -}}
{{- if and .Values.controller.enabled .Values.controller.annotatePods.enabled }}{{ $files = append $files "annotator/rbac.yaml" }}{{ end -}}
{{- if .Values.nodeAgent.enabled }}{{ $files = append $files "base/node-agent.yaml" }}{{ end -}}
{{- if .Values.webhook.enabled }}{{ $files = append $files "base/webhook.yaml" }}{{ end -}}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificate "cert-manager") }}{{ $files = append $files "base/webhook-certificate.yaml" }}{{ end -}}
{{- if .Values.provisioner.enabled }}{{ $files = concat $files (list "provisioner/serviceaccount.yaml" "provisioner/rbac.yaml" "provisioner/provisioner.yaml") }}{{ end -}}
{{- toJson $files -}}
{{- end -}}

