import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startRuntime, type Runtime } from '../../../src/app/runtime.js';
import { silentLogger } from '../../../src/core/logger.js';
import { createSnowflakeSourceFromConfig } from '../../../src/app/worker-id.js';
import { buildSnowflakeServer } from '../../../src/http/snowflake-server.js';
import { buildOpsServer } from '../../../src/http/server.js';
import { Registry } from 'prom-client';

// /metrics lists every tag with its issued counts, those with tokens and obfuscated ones included
// (issue 42): IDMINT_METRICS_TOKEN closes it to callers without the token, on every server kind.
const METRICS_TOKEN = 'metrics-scrape-token-01';

let dir: string;
const runtimes: Runtime[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'idmint-metrics-'));
});
afterAll(async () => {
  for (const runtime of runtimes) await runtime.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(extra: Record<string, string>): Promise<Runtime> {
  const runtime = await startRuntime({
    config: loadConfig({ IDMINT_DATA_DIR: mkdtempSync(join(dir, 'data-')), IDMINT_PORT: '0', ...extra }),
    logger: silentLogger,
  });
  runtimes.push(runtime);
  return runtime;
}

describe('IDMINT_METRICS_TOKEN', () => {
  it('closes /metrics of the API server to callers without it; health and readiness stay open', async () => {
    const { app } = await start({ IDMINT_METRICS_TOKEN: METRICS_TOKEN });
    expect((await app.inject({ url: '/v1/ids/demo?count=3' })).statusCode).toBe(200);
    const open = await app.inject({ url: '/metrics' });
    expect(open.statusCode).toBe(401);
    expect(open.json()).toMatchObject({ error: { code: 'UNAUTHORIZED', message: expect.stringContaining('IDMINT_METRICS_TOKEN') } });
    expect(open.body).not.toContain('idmint_ids_issued_total');
    expect((await app.inject({ url: '/metrics', headers: { authorization: 'Bearer wrong-token-xx' } })).statusCode).toBe(401);
    const scraped = await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(scraped.statusCode).toBe(200);
    expect(scraped.body).toMatch(/^idmint_ids_issued_total\{biz_tag="demo",source="pool"\} 3$/m);
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);
  });

  it('closes /metrics of a process without the API role, and of the standalone Snowflake server', async () => {
    // What a refill or responder process serves.
    const ops = buildOpsServer({
      registry: new Registry(),
      readiness: async () => ({ status: 'ready', checks: {} }),
      host: '127.0.0.1',
      metricsToken: METRICS_TOKEN,
    });
    expect((await ops.inject({ url: '/metrics' })).statusCode).toBe(401);
    expect((await ops.inject({ url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).statusCode).toBe(200);
    await ops.close();

    const config = loadConfig({ IDMINT_DATA_DIR: mkdtempSync(join(dir, 'flake-')), IDMINT_WORKER_ID: '3' });
    const source = await createSnowflakeSourceFromConfig(config, { logger: silentLogger });
    const flake = await buildSnowflakeServer({ source, metricsToken: METRICS_TOKEN });
    try {
      expect((await flake.inject({ url: '/metrics' })).statusCode).toBe(401);
      expect((await flake.inject({ url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).statusCode).toBe(200);
    } finally {
      await flake.close();
      await source.close();
    }
  });

  it('leaves /metrics open when unset (Prometheus scrapes it without credentials)', async () => {
    const { app } = await start({});
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(200);
  });
});
