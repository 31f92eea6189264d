import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { startFailure } from '../../../src/app/process.js';
import { ZkClient } from '../../../src/zookeeper/client.js';

describe('startFailure', () => {
  it('prints a misconfiguration as one line, CONFIG_INVALID: what to change', async () => {
    const config = (() => {
      try {
        return loadConfig({ IDMINT_PROCESSES: '2', IDMINT_PORT: '8080' });
      } catch (err) {
        return err;
      }
    })();
    expect(startFailure(config)).toBe(
      'CONFIG_INVALID: invalid configuration: IDMINT_PROCESSES > 1 needs DATABASE_URL (the embedded database has one owner; run one process, or use Postgres)',
    );
    const option = await ZkClient.connect({ connect: 'zk' }).catch((err: unknown) => err);
    expect(startFailure(option)).toBe('CONFIG_INVALID: ZooKeeper: option connect (ZK_CONNECT) must be host:port[,host:port], got "zk"');
  });

  it('prints a fault that is not ours with its stack', () => {
    expect(startFailure(new TypeError('boom'))).toMatch(/^TypeError: boom\n\s+at /);
  });
});
