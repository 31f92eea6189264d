import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startRuntime, type Runtime } from '../../../src/app/runtime.js';
import { createSnowflakeSourceFromConfig } from '../../../src/app/worker-id.js';
import { silentLogger } from '../../../src/core/logger.js';
import type { SnowflakeSource } from '../../../src/dispenser/sources/snowflake.js';
import { buildSnowflakeServer } from '../../../src/http/snowflake-server.js';

// The per-client rate limit holds on every route that hands out IDs, the Leaf Snowflake route
// included (issue 42: 20 of 20 served at a limit of 5 per window), on the API server and on the
// standalone Snowflake server. A long window, so no request falls into the next one.
const LIMIT = 5;
const ROUTES = ['/v1/ids/demo', '/v1/blocks/demo', '/api/segment/get/demo', '/api/snowflake/get/any'];

/** Statuses of `n` requests from one client. */
async function statuses(app: FastifyInstance, url: string, n: number, remoteAddress = '10.0.0.7'): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.inject({ url, remoteAddress })).statusCode);
  return out;
}

const within = (served: number): number[] => [...Array.from({ length: served }, () => 200), ...Array.from({ length: 3 }, () => 429)];

describe('per-client rate limit on every issuing route', () => {
  let dir: string;
  let runtime: Runtime;
  let source: SnowflakeSource | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idmint-ratelimit-'));
  });
  afterAll(async () => {
    await runtime?.close();
    await source?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(ROUTES)('the API server refuses the request past the limit on %s', async (route) => {
    runtime ??= await startRuntime({
      config: loadConfig({
        IDMINT_DATA_DIR: join(dir, 'api'),
        IDMINT_PORT: '0',
        IDMINT_RATE_LIMIT_CLIENT: String(LIMIT),
        IDMINT_RATE_LIMIT_WINDOW_MS: '600000',
      }),
      logger: silentLogger,
    });
    // A fresh client per route: the limit counts a client's requests across routes.
    expect(await statuses(runtime.app, route, LIMIT + 3, `10.0.1.${ROUTES.indexOf(route)}`)).toEqual(within(LIMIT));
  });

  it('the standalone Snowflake server refuses the request past the limit', async () => {
    const config = loadConfig({
      IDMINT_DATA_DIR: join(dir, 'snowflake'),
      IDMINT_WORKER_ID: '9',
      IDMINT_RATE_LIMIT_CLIENT: String(LIMIT),
      IDMINT_RATE_LIMIT_WINDOW_MS: '600000',
    });
    source = await createSnowflakeSourceFromConfig(config, { logger: silentLogger });
    const app = await buildSnowflakeServer({ source, rateLimits: { perClient: LIMIT, perTag: 0, windowMs: 600_000 } });
    try {
      expect(await statuses(app, '/api/snowflake/get/any', LIMIT + 3)).toEqual(within(LIMIT));
    } finally {
      await app.close();
    }
  });
});
