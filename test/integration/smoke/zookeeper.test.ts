import { randomUUID } from 'node:crypto';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Proves the wiring: the global setup named a ZooKeeper that stores and returns znodes.
describe('smoke: zookeeper', () => {
  const client = zookeeper.createClient(process.env.ZK_CONNECT!, { sessionTimeout: 10_000, retries: 1 });
  const root = `/idmint-smoke-${randomUUID()}`;

  const call = <T>(fn: (cb: (err: Error | null, value?: T) => void) => void) =>
    new Promise<T | undefined>((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));

  beforeAll(async () => {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ZooKeeper session at ${process.env.ZK_CONNECT}`)), 15_000);
      client.once('connected', () => {
        clearTimeout(timer);
        resolve();
      });
      client.connect();
    });
  });
  afterAll(async () => {
    const kids = (await call<string[]>((cb) => client.getChildren(root, (err, k) => cb(err, k)))) ?? [];
    for (const kid of kids) await call((cb) => client.remove(`${root}/${kid}`, -1, cb));
    await call((cb) => client.remove(root, -1, cb));
    client.close();
  });

  it('creates and reads a znode', async () => {
    await call<string>((cb) => client.create(root, Buffer.from('v1'), zookeeper.CreateMode.PERSISTENT, cb));
    const data = await call<Buffer>((cb) => client.getData(root, (err, buf) => cb(err, buf)));
    expect(data?.toString()).toBe('v1');
  });

  it('creates persistent sequential children, as worker-id registration does', async () => {
    const a = await call<string>((cb) => client.create(`${root}/w-`, Buffer.from('a'), zookeeper.CreateMode.PERSISTENT_SEQUENTIAL, cb));
    const b = await call<string>((cb) => client.create(`${root}/w-`, Buffer.from('b'), zookeeper.CreateMode.PERSISTENT_SEQUENTIAL, cb));
    expect(a).toMatch(/\/w-\d{10}$/);
    expect(b! > a!).toBe(true);
    const children = await call<string[]>((cb) => client.getChildren(root, (err, kids) => cb(err, kids)));
    expect(children?.sort()).toEqual([a!.split('/').pop(), b!.split('/').pop()]);
  });
});
