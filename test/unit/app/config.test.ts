import { describe, expect, it } from 'vitest';
import { loadConfig, regionOf } from '../../../src/app/config.js';
import { redisTarget, refillPrefix, usesRedis } from '../../../src/app/connections.js';
import { IdmintError } from '../../../src/core/errors.js';

describe('loadConfig', () => {
  it('applies documented defaults to an empty environment', () => {
    const config = loadConfig({});
    expect(config.IDMINT_PORT).toBe(8080);
    expect(config.IDMINT_HOST).toBe('127.0.0.1');
    expect(config.IDMINT_DATA_DIR).toBe('./data');
    expect(config.DATABASE_URL).toBeUndefined();
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ REDIS_URL: '' }).REDIS_URL).toBeUndefined();
  });

  it('names each bad variable and what it expects', () => {
    let caught: unknown;
    try {
      loadConfig({ IDMINT_PORT: 'eighty', REDIS_URL: 'localhost:6379', KAFKA_BROKERS: 'a b' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(IdmintError);
    // A misconfiguration, printed at start as `CONFIG_INVALID: …`; never a caller's BAD_REQUEST.
    expect(caught).toMatchObject({ code: 'CONFIG_INVALID', retriable: false });
    const message = (caught as IdmintError).message;
    expect(message).toMatch(/IDMINT_PORT/);
    expect(message).toMatch(/REDIS_URL: expected a URL starting with redis:\/\//);
    expect(message).toMatch(/KAFKA_BROKERS: expected a comma-separated list of host:port/);
  });
});

describe('loadConfig is strict', () => {
  it.each(['0x46A6', '1e4', ' 18102', '18102 ', '+80', '80.0', ''.padEnd(20, '9')])('refuses IDMINT_PORT=%j instead of guessing a number', (port) => {
    expect(() => loadConfig({ IDMINT_PORT: port })).toThrow(/IDMINT_PORT: expected an integer from 0 to 65535/);
  });

  it('accepts plain digits', () => {
    expect(loadConfig({ IDMINT_PORT: '18102' }).IDMINT_PORT).toBe(18102);
  });

  it.each(['        ', 'short', 'has a space inside'])('refuses the admin token %j', (token) => {
    expect(() => loadConfig({ IDMINT_ADMIN_TOKEN: token })).toThrow(/IDMINT_ADMIN_TOKEN: expected at least 8 printable characters without spaces/);
  });

  it("refuses compose/.env.example's placeholder secrets, which would otherwise serve on a published port", () => {
    expect(() => loadConfig({ IDMINT_ADMIN_TOKEN: 'change-me-admin-token' })).toThrow(
      /IDMINT_ADMIN_TOKEN: expected a secret of your own, not the example's placeholder/,
    );
    expect(() => loadConfig({ DATABASE_URL: 'postgres://idmint:change-me-postgres@postgres:5432/idmint' })).toThrow(
      /DATABASE_URL: expected a password of your own, not the example's placeholder/,
    );
    expect(loadConfig({ DATABASE_URL: 'postgres://idmint:s3cret@postgres:5432/idmint' }).DATABASE_URL).toContain('s3cret');
  });

  it('refuses a whitespace gate pass', () => {
    expect(() => loadConfig({ IDMINT_GATE_PASS: '   ' })).toThrow(/IDMINT_GATE_PASS/);
  });

  it('refuses a pool floor above either pool ceiling, naming both variables', () => {
    expect(() => loadConfig({ IDMINT_POOL_MIN_DEPTH: '2000000' })).toThrow(/IDMINT_POOL_MIN_DEPTH must not exceed IDMINT_POOL_MAX_DEPTH/);
    expect(() => loadConfig({ IDMINT_POOL_MIN_DEPTH: '2000000' })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => loadConfig({ IDMINT_POOL_MIN_DEPTH: '5000', IDMINT_POOL_MAX_RANGE_DEPTH: '4000' })).toThrow(
      /IDMINT_POOL_MIN_DEPTH must not exceed IDMINT_POOL_MAX_RANGE_DEPTH/,
    );
    expect(loadConfig({ IDMINT_POOL_MAX_RANGE_DEPTH: '100000000' }).IDMINT_POOL_MAX_RANGE_DEPTH).toBe(100_000_000);
  });

  it('caps IDMINT_MAX_COUNT at 100000', () => {
    expect(() => loadConfig({ IDMINT_MAX_COUNT: '1000000' })).toThrow(/IDMINT_MAX_COUNT: expected an integer from 1 to 100000/);
  });
});

describe('IDMINT_PROCESSES and secured connections', () => {
  const pg = { DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' };
  it('takes a number or auto (one per core), 1 by default', () => {
    expect(loadConfig({}).IDMINT_PROCESSES).toBe(1);
    expect(loadConfig({ ...pg, IDMINT_PROCESSES: '4' }).IDMINT_PROCESSES).toBe(4);
    expect(loadConfig({ ...pg, IDMINT_PROCESSES: 'auto' }).IDMINT_PROCESSES).toBeGreaterThanOrEqual(1);
    expect(() => loadConfig({ ...pg, IDMINT_PROCESSES: '0' })).toThrow(/IDMINT_PROCESSES: expected a number from 1 to 256, or auto/);
    expect(() => loadConfig({ ...pg, IDMINT_PROCESSES: 'many' })).toThrow(/IDMINT_PROCESSES/);
  });

  it("names a region only with both IDMINT_REGIONS and IDMINT_REGION; unset or one region is today's behaviour", () => {
    expect(regionOf(loadConfig({}))).toBeUndefined();
    expect(regionOf(loadConfig({ IDMINT_REGIONS: '1' }))).toBeUndefined();
    expect(regionOf(loadConfig({ IDMINT_REGIONS: '3', IDMINT_REGION: '2' }))).toEqual({ regions: 3, region: 2, stripe: 1_000_000 });
    expect(regionOf(loadConfig({ IDMINT_REGIONS: '2', IDMINT_REGION: '0', IDMINT_REGION_STRIPE: '4096' }))).toEqual({ regions: 2, region: 0, stripe: 4096 });
    expect(() => loadConfig({ IDMINT_REGIONS: '2' })).toThrow(/IDMINT_REGIONS=2 needs IDMINT_REGION \(this deployment's number, 0 to 1\)/);
    expect(() => loadConfig({ IDMINT_REGION: '1' })).toThrow(/IDMINT_REGION and IDMINT_REGION_STRIPE need IDMINT_REGIONS/);
    expect(() => loadConfig({ IDMINT_REGIONS: '2', IDMINT_REGION: '2' })).toThrow(/IDMINT_REGION: region must be an integer from 0 to 1, got 2/);
    expect(() => loadConfig({ IDMINT_REGIONS: '65', IDMINT_REGION: '0' })).toThrow(/IDMINT_REGIONS: expected an integer from 1 to 64/);
    expect(() => loadConfig({ IDMINT_REGIONS: '2', IDMINT_REGION: '0', IDMINT_REGION_STRIPE: '0' })).toThrow(
      /IDMINT_REGION_STRIPE: expected an integer from 1 to 140737488355327/,
    );
  });

  it('names Kafka topics and groups in IDMINT_KAFKA_NAMESPACE; an explicit request topic or group still wins', () => {
    expect(loadConfig({})).toMatchObject({ IDMINT_KAFKA_REQUEST_TOPIC: 'idmint.requests', IDMINT_KAFKA_RESPONDER_GROUP: 'idmint.responders' });
    expect(loadConfig({ IDMINT_KAFKA_NAMESPACE: 'eu-1' })).toMatchObject({
      IDMINT_KAFKA_REQUEST_TOPIC: 'idmint.eu-1.requests',
      IDMINT_KAFKA_RESPONDER_GROUP: 'idmint.eu-1.responders',
    });
    expect(loadConfig({ IDMINT_KAFKA_NAMESPACE: 'eu', IDMINT_KAFKA_REQUEST_TOPIC: 'mine' })).toMatchObject({
      IDMINT_KAFKA_REQUEST_TOPIC: 'mine',
      IDMINT_KAFKA_RESPONDER_GROUP: 'idmint.eu.responders',
    });
    expect(() => loadConfig({ IDMINT_KAFKA_NAMESPACE: 'EU' })).toThrow(/IDMINT_KAFKA_NAMESPACE: expected Kafka namespace "EU": lower-case letters/);
    expect(() => loadConfig({ IDMINT_KAFKA_NAMESPACE: 'replies' })).toThrow(/IDMINT_KAFKA_NAMESPACE: .*a name idmint's own topics use/);
  });

  it('refuses one static worker id for several processes (their Snowflake IDs would repeat)', () => {
    const env = { DATABASE_URL: 'postgres://u@127.0.0.1/db', IDMINT_WORKER_ID: '7' };
    expect(() => loadConfig({ ...env, IDMINT_PROCESSES: '2' })).toThrow(/IDMINT_PROCESSES > 1 would give it to every process/);
    expect(loadConfig({ ...env, IDMINT_PROCESSES: '1' }).IDMINT_WORKER_ID).toBe(7);
  });

  it('keeps the embedded database single-process', () => {
    expect(() => loadConfig({ IDMINT_PROCESSES: '2' })).toThrow(/IDMINT_PROCESSES > 1 needs DATABASE_URL/);
  });

  it("wants REDIS_SENTINELS and REDIS_SENTINEL_NAME together; sentinel targets carry REDIS_URL's credentials and database", () => {
    expect(() => loadConfig({ REDIS_SENTINELS: '127.0.0.1:26379' })).toThrow(/REDIS_SENTINELS and REDIS_SENTINEL_NAME go together/);
    expect(() => loadConfig({ REDIS_SENTINEL_NAME: 'm' })).toThrow(/go together/);
    expect(() => loadConfig({ REDIS_SENTINELS: 'nohost', REDIS_SENTINEL_NAME: 'm' })).toThrow(/host:port/);
    const config = loadConfig({
      REDIS_SENTINELS: '10.0.0.1:26379,10.0.0.2:26380',
      REDIS_SENTINEL_NAME: 'pools',
      REDIS_URL: 'redis://app:s3cret@ignored:6379/2',
    });
    expect(usesRedis(config)).toBe(true);
    const target = redisTarget(config);
    expect(target.url).toBeUndefined();
    expect(target.options).toMatchObject({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
      ],
      name: 'pools',
      username: 'app',
      password: 's3cret',
      db: 2,
    });
    expect(target.where).not.toContain('s3cret');
    // A hung master keeps its socket open: the client follows +switch-master, and a READONLY
    // answer (a demoted master) makes it reconnect without resending.
    expect(target.options).toMatchObject({ failoverDetector: true });
    const onError = target.options.reconnectOnError as (err: Error) => boolean | 1 | 2;
    expect(onError(new Error("READONLY You can't write against a read only replica."))).toBe(1);
    expect(onError(new Error('ERR unknown command'))).toBe(false);
    expect(usesRedis(loadConfig({}))).toBe(false);
  });

  it("takes REDIS_CLUSTER_NODES alone, with REDIS_URL's credentials but no database; the refill queue's prefix becomes a hash tag", () => {
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', REDIS_SENTINELS: '127.0.0.1:26379', REDIS_SENTINEL_NAME: 'm' })).toThrow(
      /REDIS_CLUSTER_NODES and REDIS_SENTINELS/,
    );
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', REDIS_URL: 'redis://h:6379/3' })).toThrow(/database 0 only/);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'nohost' })).toThrow(/host:port/);
    const config = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7001', REDIS_URL: 'redis://app:s3cret@ignored:6379/0' });
    expect(usesRedis(config)).toBe(true);
    const target = redisTarget(config);
    expect(target.cluster).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
    ]);
    expect(target.options).toMatchObject({ username: 'app', password: 's3cret' });
    expect(target.where).not.toContain('s3cret');
    expect(refillPrefix(config)).toBe('{bull}');
    expect(refillPrefix(loadConfig({ REDIS_URL: 'redis://h:6379' }))).toBe('bull');
  });

  it('wants the three Kafka SASL variables together, and a readable CA file', () => {
    expect(() => loadConfig({ IDMINT_KAFKA_SASL_MECHANISM: 'scram-sha-512' })).toThrow(/go together/);
    expect(() => loadConfig({ IDMINT_KAFKA_SASL_MECHANISM: 'gssapi', IDMINT_KAFKA_SASL_USERNAME: 'u', IDMINT_KAFKA_SASL_PASSWORD: 'p' })).toThrow(
      /plain, scram-sha-256 or scram-sha-512/,
    );
    expect(() => loadConfig({ IDMINT_REDIS_TLS_CA: '/nonexistent/ca.pem' })).toThrow(/IDMINT_REDIS_TLS_CA: expected a readable PEM file/);
    expect(() => loadConfig({ IDMINT_ZK_AUTH: 'no-colon' })).toThrow(/IDMINT_ZK_AUTH: expected user:password/);
  });
});
