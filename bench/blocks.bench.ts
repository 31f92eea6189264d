/**
 * Blocks over HTTP: `GET /v1/blocks/demo?count=1,000,000` against `GET /v1/ids/demo?count=10,000`
 * (the largest list a request may ask for by default), same embedded server, same run.
 * Target (issue "Blocks end to end"): ≥ 100 M IDs/s over HTTP with blocks.
 * Reproduce: `npm run bench -- blocks`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { spawnServer } from '../test/support/spawn.js';
import { perSecond, table, type Section } from './lib.js';

const DURATION_S = 6;
const CONNECTIONS = 8;
const BLOCK_COUNT = 1_000_000;
const LIST_COUNT = 10_000;
const TARGET = 100e6;

async function idsPerSecond(url: string, count: number): Promise<{ ids: number; requests: number; p99: number; failed: number }> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S });
  return { ids: result.requests.average * count, requests: result.requests.average, p99: result.latency.p99, failed: result.non2xx + result.errors };
}

export async function run(): Promise<Section> {
  const dataDir = mkdtempSync(join(tmpdir(), 'idmint-bench-blocks-'));
  const server = await spawnServer({ IDMINT_DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
  try {
    await autocannon({ url: `${server.url}/v1/blocks/demo?count=${BLOCK_COUNT}`, connections: CONNECTIONS, duration: 2 });
    const blocks = await idsPerSecond(`${server.url}/v1/blocks/demo?count=${BLOCK_COUNT}`, BLOCK_COUNT);
    const lists = await idsPerSecond(`${server.url}/v1/ids/demo?count=${LIST_COUNT}`, LIST_COUNT);
    const met = blocks.ids >= TARGET && blocks.failed === 0;
    return {
      title: 'Blocks over HTTP',
      body: [
        `Embedded server, autocannon with ${CONNECTIONS} connections for ${DURATION_S} s each, same run. Reproduce: \`npm run bench -- blocks\`.`,
        '',
        table(
          ['route', 'IDs per request', 'requests/s', 'IDs/s', 'p99 ms', 'failed'],
          [
            [
              `GET /v1/blocks/demo?count=${BLOCK_COUNT}`,
              BLOCK_COUNT.toLocaleString('en'),
              perSecond(blocks.requests),
              perSecond(blocks.ids),
              blocks.p99,
              blocks.failed,
            ],
            [
              `GET /v1/ids/demo?count=${LIST_COUNT} (baseline)`,
              LIST_COUNT.toLocaleString('en'),
              perSecond(lists.requests),
              perSecond(lists.ids),
              lists.p99,
              lists.failed,
            ],
          ],
        ),
        '',
        `Blocks: ${(blocks.ids / lists.ids).toFixed(0)} × the IDs/s of the largest lists. Target ≥ 100 M IDs/s over HTTP: **${met ? 'met' : 'not met'}** (${perSecond(blocks.ids)} IDs/s).`,
      ].join('\n'),
    };
  } finally {
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}
