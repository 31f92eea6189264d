import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { testHooks } from '../../../src/app/test-hooks.js';

describe('test hooks', () => {
  it('are read by name, outside the configuration users read', () => {
    expect(testHooks({})).toEqual({ clockFile: undefined, pauseAfterAllocateMs: 0 });
    expect(testHooks({ IDMINT_TEST_CLOCK_FILE: ' /tmp/offset ', IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS: '250' })).toEqual({
      clockFile: '/tmp/offset',
      pauseAfterAllocateMs: 250,
    });
    expect(Object.keys(loadConfig({}))).not.toContain('IDMINT_TEST_CLOCK_FILE');
    expect(Object.keys(loadConfig({}))).not.toContain('IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS');
  });

  it('a malformed hook is refused with what to do', () => {
    expect(() => testHooks({ IDMINT_REFILL_PAUSE_AFTER_ALLOCATE_MS: 'soon' })).toThrow(/whole number of milliseconds, got "soon"; unset it outside tests/);
  });
});
