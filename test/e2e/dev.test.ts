import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createKafkaClient } from '../../src/client/kafka/rpc-client.js';
import { testKafka } from '../support/kafka.js';
import { untilReady } from '../support/spawn.js';
import { expectNoDuplicates } from '../support/unique.js';
import { inTerminal } from '../support/terminal.js';

// `npm run dev` brings the topology up as processes on the local servers (two APIs, refill,
// responder), serves over HTTP and Kafka, labels its combined log, and Ctrl-C stops it all.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Whether a port on loopback can be listened on now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Four consecutive free ports for `npm run dev`, below the ephemeral range (32768 and up on
 * Linux): there no outgoing connection of a test running beside this one, and no freePort(), can
 * take one between this check and the dev script's listen (CI once lost its fourth port so).
 */
async function fourFreePorts(): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    if ((await Promise.all([0, 1, 2, 3].map((i) => canListen(base + i)))).every(Boolean)) return base;
  }
}


describe('npm run dev', () => {
  it('runs 2 api + refill + responder on the local servers; curl and a Kafka request get IDs; Ctrl-C stops everything', async () => {
    const base = await fourFreePorts();
    const suffix = Math.random().toString(36).slice(2, 10);
    const requestTopic = `dev.requests.${suffix}`;
    const responders = `dev.responders.${suffix}`;
    // In a pseudo-terminal, stopped by a typed Ctrl-C as a user stops it (the terminal signals
    // every process of its foreground group, not only the script).
    const terminal = inTerminal('node scripts/dev.mjs', {
      cwd: ROOT,
      env: {
        ...process.env,
        IDMINT_DEV_PORT: String(base),
        IDMINT_INFRA_LIB: join(ROOT, '.infra', 'lib'),
        IDMINT_PG_SCHEMA: `dev_${suffix}`,
        IDMINT_POOL_KEY_PREFIX: `dev-${suffix}:`,
        IDMINT_REFILL_PREFIX: `dev-${suffix}`,
        IDMINT_KAFKA_REQUEST_TOPIC: requestTopic,
        IDMINT_KAFKA_RESPONDER_GROUP: responders,
        LOG_LEVEL: 'info',
      },
    });
    const output = terminal.output;
    const kafka = testKafka('dev-test');
    const client = createKafkaClient({ kafka, requestTopic, clientId: 'dev-test' });
    try {
      for (let i = 0; i < 4; i++) await untilReady(`http://127.0.0.1:${base + i}`, { timeoutMs: 90_000, output });
      const created = await fetch(`http://127.0.0.1:${base}/v1/biz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"bizTag":"order"}' });
      expect(created.status, await created.clone().text()).toBe(201);
      const ids: string[] = [];
      for (const port of [base, base + 1]) {
        const body = (await (await fetch(`http://127.0.0.1:${port}/v1/ids/order?count=5`)).json()) as { ids: string[] };
        ids.push(...body.ids);
      }
      await client.start();
      ids.push(...(await client.getIds('order', 5, { timeoutMs: 30_000 })));
      expect(ids).toHaveLength(15);
      expectNoDuplicates(ids);
      expect(ids).toHaveLength(15);
      for (const label of ['api-1', 'api-2', 'refill', 'responder']) expect(output()).toMatch(new RegExp(`^${label} +\\| `, 'm'));
    } finally {
      await client.close();
      terminal.ctrlC();
    }
    try {
      expect(await terminal.exited, output()).toBe(0);
      // Each process stopped once, gracefully: no second signal, no exit 130.
      for (const label of ['api-1', 'api-2', 'refill', 'responder']) expect(output()).toMatch(new RegExp(`^${label} +\\| .*stopped cleanly`, 'm'));
      expect(output()).not.toContain('second signal');
      for (let i = 0; i < 4; i++) expect(await fetch(`http://127.0.0.1:${base + i}/healthz`).then(() => 'up', () => 'down')).toBe('down');
      // The responder left its group: the next start joins at once instead of waiting out a dead member's session.
      const admin = kafka.admin();
      await admin.connect();
      try {
        const [group] = (await admin.describeGroups([responders])).groups;
        expect(group?.members ?? []).toEqual([]);
      } finally {
        await admin.disconnect();
      }
    } finally {
      terminal.kill();
    }
  });
});
