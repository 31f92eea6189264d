import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { spawnServer, type SpawnedServer } from '../support/spawn.js';

// The deployable artifacts, checked with the tools operators use: docker-compose parses the
// compose file (no engine, no containers), promtool checks the alert rules, their unit tests and
// a live /metrics, and every Grafana query names a metric the server exports.
// scripts/ensure-tools.sh (run by .ci/run) installs docker-compose and promtool.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

interface ComposeService {
  image?: string;
  build?: unknown;
  restart?: string;
  healthcheck?: { test: string[] | string };
  environment?: Record<string, string>;
  volumes?: unknown[];
  command?: string[] | string;
}

describe('deployable artifacts', () => {
  let dataDir: string;
  let server: SpawnedServer;
  let metrics: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'idmint-deploy-'));
    server = await spawnServer({ IDMINT_DATA_DIR: dataDir });
    await fetch(`${server.url}/v1/ids/demo?count=3`);
    metrics = await (await fetch(`${server.url}/metrics`)).text();
  });

  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('compose/docker-compose.yml is valid for docker-compose and runs the whole topology with health checks and volumes', async () => {
    const { stdout } = await run('docker-compose', ['--env-file', 'compose/.env.example', '-f', 'compose/docker-compose.yml', 'config'], { cwd: ROOT });
    const config = parse(stdout) as { services: Record<string, ComposeService>; volumes: Record<string, unknown> };
    expect(Object.keys(config.services).sort()).toEqual(['api-1', 'api-2', 'kafka', 'postgres', 'prometheus', 'redis', 'refill', 'responder', 'zookeeper']);
    for (const name of ['api-1', 'api-2', 'refill', 'responder']) {
      const service = config.services[name]!;
      expect(JSON.stringify(service.healthcheck?.test)).toContain('/readyz');
      expect(service.restart).toBe('unless-stopped');
      expect(service.environment?.IDMINT_ROLES).toBe(name.startsWith('api') ? 'api' : name);
    }
    for (const name of ['postgres', 'redis', 'kafka', 'zookeeper']) expect(config.services[name]!.healthcheck, name).toBeDefined();
    expect(JSON.stringify(config.services.redis!.command)).toContain('appendonly');
    expect(config.services.kafka!.image).toBe('apache/kafka:4.4.0');
    expect(config.services.zookeeper!.image).toBe('zookeeper:3.8');
    expect(Object.keys(config.volumes).length).toBeGreaterThanOrEqual(5);
    const prometheus = readFileSync(join(ROOT, 'compose/prometheus.yml'), 'utf8');
    for (const target of ['api-1:8080', 'api-2:8080', 'refill:8080', 'responder:8080']) expect(prometheus).toContain(target);
  });

  it('compose/docker-compose.ha.yml is valid and runs three Kafka brokers, three ZooKeeper servers and Redis under three Sentinels', async () => {
    const { stdout } = await run('docker-compose', ['--env-file', 'compose/.env.example', '-f', 'compose/docker-compose.ha.yml', 'config'], { cwd: ROOT });
    const config = parse(stdout) as { services: Record<string, ComposeService> };
    const names = Object.keys(config.services);
    for (const kind of ['kafka', 'zookeeper', 'redis', 'sentinel'])
      expect(
        names.filter((n) => n.startsWith(`${kind}-`)),
        kind,
      ).toHaveLength(3);
    for (const name of ['api-1', 'api-2', 'refill', 'responder']) {
      const env = config.services[name]!.environment!;
      expect(env.KAFKA_BROKERS).toBe('kafka-1:9092,kafka-2:9092,kafka-3:9092');
      expect(env.ZK_CONNECT).toBe('zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181');
      expect(env.REDIS_SENTINELS).toBe('sentinel-1:26379,sentinel-2:26379,sentinel-3:26379');
      expect(env.REDIS_SENTINEL_NAME).toBe('idmint-pools');
      expect(env.REDIS_URL).toBeUndefined();
      expect(JSON.stringify(config.services[name]!.healthcheck?.test)).toContain('/readyz');
    }
    // Every Kafka node votes in the controller quorum and has its own id and address.
    const kafka = ['kafka-1', 'kafka-2', 'kafka-3'].map((n) => config.services[n]!.environment!);
    expect(new Set(kafka.map((e) => e.KAFKA_NODE_ID)).size).toBe(3);
    expect(new Set(kafka.map((e) => e.KAFKA_CONTROLLER_QUORUM_VOTERS)).size).toBe(1);
    expect(new Set(kafka.map((e) => e.CLUSTER_ID)).size).toBe(1);
    expect(String(kafka[0]!.KAFKA_MIN_INSYNC_REPLICAS)).toBe('2');
    expect(new Set(['zookeeper-1', 'zookeeper-2', 'zookeeper-3'].map((n) => config.services[n]!.environment!.ZOO_MY_ID)).size).toBe(3);
  });

  it('the Dockerfile builds in stages, ships production dependencies only, runs as a user with a health check', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*\n?.*readyz/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "bin\/idmint.js"\]$/m);
  });

  it('promtool accepts the alert rules and their unit tests', async () => {
    const check = await run('promtool', ['check', 'rules', 'monitoring/alerts.yml'], { cwd: ROOT });
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const tests = await run('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: join(ROOT, 'monitoring') });
    expect(tests.stdout).toContain('SUCCESS');
  });

  it('promtool accepts the live /metrics of a server', async () => {
    const child = execFile('promtool', ['check', 'metrics']);
    const result = new Promise<{ code: number | null; out: string }>((resolve) => {
      let out = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      child.on('exit', (code) => resolve({ code, out }));
      // A missing promtool is an error, not a wait (scripts/ensure-tools.sh installs it).
      child.on('error', (err) => resolve({ code: -1, out: `${err.message}: run scripts/ensure-tools.sh` }));
    });
    child.stdin?.end(metrics);
    const { code, out } = await result;
    expect(out).toBe('');
    expect(code).toBe(0);
  });

  it('every Grafana panel queries metrics the server exports, and every alert too', () => {
    const exported = new Set(
      metrics
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]!),
    );
    const names = (expr: string): string[] => [...expr.matchAll(/\b(idmint_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'monitoring/grafana-dashboard.json'), 'utf8')) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    const rules = readFileSync(join(ROOT, 'monitoring/alerts.yml'), 'utf8');
    // Metrics of roles this embedded server does not run (Redis pools, refills, Kafka) are declared in their modules.
    const declared = new Set(exported);
    for (const file of ['src/pool/redis/metrics.ts', 'src/refill/metrics.ts', 'src/kafka/metrics.ts']) {
      for (const m of readFileSync(join(ROOT, file), 'utf8').matchAll(/'(idmint_[a-z0-9_]+)'/g)) declared.add(m[1]!);
    }
    const missing = [...dashboard.panels.flatMap((p) => p.targets.flatMap((t) => names(t.expr))), ...names(rules)].filter((n) => !declared.has(n));
    expect(missing).toEqual([]);
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
  });
});
