import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ZkClient } from '../../../src/worker-id/index.js';
import { capturingLogger } from './helpers.js';
import { env } from '../../support/env.js';
import { until } from '../../support/poll.js';
import { freePort } from '../../support/ports.js';
import { uniqueName } from '../../support/names.js';

describe('ZkClient', () => {
  it('creates, reads, writes, lists and removes nodes', async () => {
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT') });
    const root = `/${uniqueName('idmint-test-', '')}`;
    try {
      await zk.mkdirp(`${root}/a`);
      const seq = await zk.create(`${root}/a/n-`, Buffer.from('x'), 2);
      expect(seq).toMatch(new RegExp(`^${root}/a/n-\\d{10}$`));
      await zk.setData(seq, Buffer.from('y'));
      expect((await zk.getData(seq)).data!.toString()).toBe('y');
      expect(await zk.getChildren(`${root}/a`)).toEqual([seq.split('/').pop()]);
      expect(await zk.exists(`${root}/nope`)).toBeNull();
      await zk.remove(seq);
      await zk.remove(`${root}/a`);
      await zk.remove(root);
      expect(await zk.exists(root)).toBeNull();
    } finally {
      zk.close();
    }
  });

  it('connect fails fast with NOT_READY naming the connect string', async () => {
    const connect = `127.0.0.1:${await freePort()}`;
    await expect(ZkClient.connect({ connect, connectTimeoutMs: 200 })).rejects.toMatchObject({ code: 'NOT_READY', message: expect.stringContaining(connect) });
  });

  it('rejects a malformed connect string or timeout at construction as a misconfiguration naming it', async () => {
    await expect(ZkClient.connect({ connect: 'not a host' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      field: 'connect',
      message: expect.stringContaining('ZK_CONNECT'),
    });
    await expect(ZkClient.connect({ connect: env('ZK_CONNECT'), operationTimeoutMs: 0 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      field: 'operationTimeoutMs',
    });
  });

  it('a reply the library cannot parse drops the connection instead of crashing the process', async () => {
    const { logger, lines } = capturingLogger();
    const zk = await ZkClient.connect({ connect: env('ZK_CONNECT'), logger });
    try {
      const cm = (zk as unknown as { client: { connectionManager: { onSocketData(b: Buffer): void } } }).client.connectionManager;
      // A watch notification (xid -1) cut short after its header: the library's parser throws on it.
      const frame = Buffer.alloc(20);
      frame.writeInt32BE(16, 0);
      frame.writeInt32BE(-1, 4);
      expect(() => cm.onSocketData(frame)).not.toThrow();
      expect(lines.some((l) => String(l.msg).includes('could not parse'))).toBe(true);
      // Calls in flight fail with CONNECTION_LOSS; the client reconnects and serves again.
      await until('ZooKeeper to answer again', async () => (await zk.exists('/').catch(() => null)) !== null);
      expect(zk.connected).toBe(true);
    } finally {
      zk.close();
    }
  });
});

describe('ZkClient against a server that accepts and never answers', () => {
  // ZooKeeper restarting can accept a connection before it serves: node-zookeeper-client then
  // waited for the session's answer without a deadline (one API process's worker-id client stayed
  // there after a restart, issuing no Snowflake IDs). The first connection here is held silent; the
  // ones after it reach the real ZooKeeper.
  it('drops the silent connection after the handshake deadline and connects on the next', async () => {
    const [zkHost, zkPort] = env('ZK_CONNECT').split(',')[0]!.split(':') as [string, string];
    const held: Socket[] = [];
    let accepted = 0;
    const proxy = createServer((socket) => {
      if (accepted++ === 0) {
        held.push(socket);
        socket.on('error', () => undefined);
        return;
      }
      const upstream = connect(Number(zkPort), zkHost);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const port = (proxy.address() as AddressInfo).port;
    const zk = await ZkClient.connect({ connect: `127.0.0.1:${port}`, sessionTimeoutMs: 4000, connectTimeoutMs: 8000 });
    try {
      expect(accepted).toBeGreaterThanOrEqual(2);
      expect(zk.connected).toBe(true);
      expect(await zk.exists('/')).not.toBeNull();
    } finally {
      zk.close();
      for (const socket of held) socket.destroy();
      proxy.close();
    }
  });
});
