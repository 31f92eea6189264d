import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
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
    const message = (caught as IdmintError).message;
    expect(message).toMatch(/IDMINT_PORT/);
    expect(message).toMatch(/REDIS_URL: expected a URL starting with redis:\/\//);
    expect(message).toMatch(/KAFKA_BROKERS: expected a comma-separated list of host:port/);
  });
});
