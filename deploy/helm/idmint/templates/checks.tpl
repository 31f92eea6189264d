{{/* What the schema cannot say: the chart refuses to render a deployment that would break an invariant. */}}
{{- define "idmint.checks" -}}
{{- $needed := int (include "idmint.workerIdsNeeded" .) -}}
{{- if gt $needed (int .Values.workerIds.space) -}}
{{- fail (printf "the API (at most %v pods with its HPA) and the responders would need %d worker ids, more than workerIds.space (%v): lower api.hpa.maxReplicas, api.replicas or responder.replicas" (ternary .Values.api.hpa.maxReplicas .Values.api.replicas .Values.api.hpa.enabled) $needed .Values.workerIds.space) -}}
{{- end -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (add .Values.preStopSleepSeconds .Values.drainSeconds | int) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + drainSeconds (%v): a pod would be killed while it drains" .Values.terminationGracePeriodSeconds (add .Values.preStopSleepSeconds .Values.drainSeconds)) -}}
{{- end -}}
{{- if and .Values.api.hpa.enabled (lt (int .Values.api.hpa.maxReplicas) (int .Values.api.hpa.minReplicas)) -}}
{{- fail "api.hpa.maxReplicas must be at least api.hpa.minReplicas" -}}
{{- end -}}
{{- if and (not .Values.secrets.existingSecret) (not .Values.servers.databaseUrl) -}}
{{- fail "servers.databaseUrl is required (pods share one Postgres; the embedded database has one owner)" -}}
{{- end -}}
{{- if and (eq .Values.workerIds.provider "zookeeper") (not .Values.secrets.existingSecret) (not .Values.servers.zkConnect) -}}
{{- fail "workerIds.provider=zookeeper needs servers.zkConnect" -}}
{{- end -}}
{{- if and (eq .Values.workerIds.provider "redis") (not .Values.secrets.existingSecret) (not (or .Values.servers.redisUrl .Values.servers.redisSentinels .Values.servers.redisClusterNodes)) -}}
{{- fail "workerIds.provider=redis needs servers.redisUrl, redisSentinels or redisClusterNodes" -}}
{{- end -}}
{{- end -}}
