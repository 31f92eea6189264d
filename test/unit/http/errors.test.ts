import { afterAll, describe, expect, it } from 'vitest';
import { createFastify } from '../../../src/http/base.js';
import { BadRequestError, ConfigError } from '../../../src/core/errors.js';
import { OptionsError } from '../../../src/core/options.js';
import { memoryLogger } from '../core/helpers.js';

// A misconfiguration met while serving is ours, not the caller's: never a 400, never its message.
describe('HTTP errors: CONFIG_INVALID never reaches a caller', () => {
  const { logger, lines } = memoryLogger();
  // createFastify installs the error handling (http/errors.ts).
  const app = createFastify({ component: 'http', logger });
  app.get('/options', () => {
    throw new OptionsError('RedisPool', 'thresholdRatio', 'must be in (0, 1]');
  });
  app.get('/epoch', () => {
    throw new ConfigError('layout "leaf" ran out of time bits on 2084-09-06T15:47:35.551Z; configure a later epoch or more time bits', 'epoch');
  });
  app.get('/caller', () => {
    throw new BadRequestError('count must be an integer from 1 to 10', 'count');
  });
  afterAll(() => app.close());

  it.each(['/options', '/epoch'])('%s answers the internal fault (503 NOT_READY) and logs the misconfiguration with its stack', async (url) => {
    const response = await app.inject({ url });
    expect(response.statusCode).toBe(503);
    expect(response.json()).toEqual({ error: { code: 'NOT_READY', message: 'internal fault; the server logged the details' } });
    const logged = lines.filter((l) => l.msg === 'request failed' && l.level === 50);
    const last = logged[logged.length - 1] as { err: { stack: string; code: string } } | undefined;
    expect(last?.err.code).toBe('CONFIG_INVALID');
    expect(last?.err.stack).toMatch(/ConfigError|OptionsError/);
  });

  it("still answers a caller's mistake as 400 BAD_REQUEST", async () => {
    const response = await app.inject({ url: '/caller' });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: { code: 'BAD_REQUEST', message: 'count must be an integer from 1 to 10' } });
  });
});
