// Exit 0 when a Kafka broker answers a metadata request (naming at least minBrokers brokers in
// the cluster, default 1), 1 otherwise.
// Usage: node scripts/kafka-probe.mjs host:port[,host:port] [timeoutMs] [minBrokers]
// Used by infra.sh: an open port is not enough, the broker must serve metadata.
// A secured broker is reached with idmint's own variables (IDMINT_KAFKA_TLS_CA, IDMINT_KAFKA_SASL_*).
import { readFileSync } from 'node:fs';
import { clearTimeout, setTimeout } from 'node:timers';
import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;
const brokers = (process.argv[2] ?? '127.0.0.1:19092').split(',');
const timeoutMs = Number(process.argv[3] ?? 3000);
const minBrokers = Number(process.argv[4] ?? 1);
const env = process.env;

const kafka = new Kafka({
  clientId: 'idmint-infra-probe',
  brokers,
  logLevel: logLevel.NOTHING,
  connectionTimeout: Math.min(timeoutMs, 1000),
  requestTimeout: timeoutMs,
  retry: { retries: 0 },
  ...(env.IDMINT_KAFKA_TLS_CA ? { ssl: { ca: [readFileSync(env.IDMINT_KAFKA_TLS_CA, 'utf8')] } } : {}),
  ...(env.IDMINT_KAFKA_SASL_MECHANISM
    ? { sasl: { mechanism: env.IDMINT_KAFKA_SASL_MECHANISM, username: env.IDMINT_KAFKA_SASL_USERNAME, password: env.IDMINT_KAFKA_SASL_PASSWORD } }
    : {}),
});
const admin = kafka.admin();

// The process must end even if a socket hangs; the timer is the last word.
const timer = setTimeout(() => process.exit(1), timeoutMs + 500);
try {
  await admin.connect();
  const cluster = await admin.describeCluster();
  await admin.disconnect();
  clearTimeout(timer);
  process.exit(cluster.brokers.length >= minBrokers ? 0 : 1);
} catch {
  clearTimeout(timer);
  process.exit(1);
}
