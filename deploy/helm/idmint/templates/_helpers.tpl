{{/* Names and labels. */}}
{{- define "idmint.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "idmint.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "idmint.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "idmint.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "idmint.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "api"). */}}
{{- define "idmint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idmint.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "idmint.labels" -}}
helm.sh/chart: {{ include "idmint.chart" .root }}
{{ include "idmint.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: idmint
{{- end -}}

{{- define "idmint.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "idmint.fullname" .)) -}}
{{- end -}}

{{- define "idmint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "idmint.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "idmint.headlessName" -}}
{{- printf "%s-api-headless" (include "idmint.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The image, pinned: a digest, else a tag (the chart's appVersion by default); never `latest`. */}}
{{- define "idmint.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- if eq $tag "latest" -}}{{- fail "image.tag must be pinned: not latest (or set image.digest)" -}}{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* How many worker ids the pods that issue IDs may hold at most: the API (its HPA's maximum) and the responders. */}}
{{- define "idmint.workerIdsNeeded" -}}
{{- $api := ternary .Values.api.hpa.maxReplicas .Values.api.replicas .Values.api.hpa.enabled -}}
{{- $responders := ternary .Values.responder.replicas 0 (and .Values.responder.enabled (ne .Values.servers.kafkaBrokers "")) -}}
{{- add $api $responders -}}
{{- end -}}

{{/*
One pod template for every component: (dict "root" $ "component" "api" "values" .Values.api "ordinal" true).
The env is the process's whole configuration (docs/configuration.md): the Secret's and
ConfigMap's keys, then what differs per component and pod.
*/}}
{{- define "idmint.podTemplate" -}}
{{- $root := .root -}}
{{- $v := .values -}}
metadata:
  labels:
    {{- include "idmint.labels" . | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- if not $root.Values.secrets.existingSecret }}
    checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
    {{- end }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "idmint.serviceAccountName" $root }}
  automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
  containers:
    - name: idmint
      image: {{ include "idmint.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args: ["serve"]
      ports:
        - name: http
          containerPort: 8080
          protocol: TCP
      envFrom:
        - secretRef:
            name: {{ include "idmint.secretName" $root }}
        - configMapRef:
            name: {{ include "idmint.fullname" $root }}-config
      env:
        - name: POD_NAME
          valueFrom: { fieldRef: { fieldPath: metadata.name } }
        - name: POD_NAMESPACE
          valueFrom: { fieldRef: { fieldPath: metadata.namespace } }
        - name: POD_IP
          valueFrom: { fieldRef: { fieldPath: status.podIP } }
        - name: IDMINT_ROLES
          value: {{ .component }}
        - name: IDMINT_HOST
          value: "0.0.0.0"
        - name: IDMINT_PORT
          value: "8080"
        - name: IDMINT_DATA_DIR
          value: /var/lib/idmint
        {{- if .ordinal }}
        # The pod's stable name is its identity in the worker-id registry; its ordinal the id it prefers (still leased).
        - name: IDMINT_ADVERTISE
          value: "$(POD_NAME).{{ include "idmint.headlessName" $root }}.$(POD_NAMESPACE).svc:8080"
        - name: IDMINT_WORKER_ID_ORDINAL
          valueFrom: { fieldRef: { fieldPath: "metadata.labels['apps.kubernetes.io/pod-index']" } }
        {{- else }}
        - name: IDMINT_ADVERTISE
          value: "$(POD_IP):8080"
        {{- end }}
        {{- if $root.Values.tls.caSecret }}
        {{- if $root.Values.tls.redis }}
        - name: IDMINT_REDIS_TLS_CA
          value: /etc/idmint/tls/ca.pem
        {{- end }}
        {{- if $root.Values.tls.kafka }}
        - name: IDMINT_KAFKA_TLS_CA
          value: /etc/idmint/tls/ca.pem
        {{- end }}
        {{- end }}
      startupProbe:
        httpGet: { path: /healthz, port: http }
        {{- toYaml $root.Values.probes.startup | nindent 8 }}
      readinessProbe:
        httpGet: { path: /readyz, port: http }
        {{- toYaml $root.Values.probes.readiness | nindent 8 }}
      livenessProbe:
        httpGet: { path: /healthz, port: http }
        {{- toYaml $root.Values.probes.liveness | nindent 8 }}
      lifecycle:
        # The endpoints drop the pod while it still serves; then SIGTERM drains within drainSeconds.
        preStop:
          exec: { command: ["sleep", "{{ $root.Values.preStopSleepSeconds }}"] }
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: data
          mountPath: /var/lib/idmint
        - name: tmp
          mountPath: /tmp
        {{- if $root.Values.tls.caSecret }}
        - name: tls
          mountPath: /etc/idmint/tls
          readOnly: true
        {{- end }}
  volumes:
    # The worker-id lease file and clock mark: a container restart in the pod keeps them.
    - name: data
      emptyDir: { sizeLimit: {{ $root.Values.dataDir.sizeLimit }} }
    - name: tmp
      emptyDir: { sizeLimit: 64Mi }
    {{- if $root.Values.tls.caSecret }}
    - name: tls
      secret: { secretName: {{ $root.Values.tls.caSecret }} }
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
