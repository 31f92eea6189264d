import { describe, expect, it } from 'vitest';
import { BadRequestError, ConfigError, forCaller, IdmintError } from '../../../src/core/errors.js';
import { checkInteger, defaults, OptionsError, resolveOptions } from '../../../src/core/options.js';

describe('resolveOptions', () => {
  const DEFAULTS = defaults({ everyMs: 1000, name: 'x' });

  it('keeps a default for an option given as undefined, checks once, and freezes', () => {
    const s = resolveOptions(DEFAULTS, { everyMs: undefined, name: 'y' }, (o) => checkInteger('Thing', o, 'everyMs', 1));
    expect(s).toEqual({ everyMs: 1000, name: 'y' });
    expect(Object.isFrozen(s)).toBe(true);
  });

  it('refuses an option out of range as CONFIG_INVALID naming the component and the option, never BAD_REQUEST', () => {
    const err = (() => {
      try {
        resolveOptions(DEFAULTS, { everyMs: 0 }, (o) => checkInteger('Thing', o, 'everyMs', 1));
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(OptionsError);
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).not.toBeInstanceOf(BadRequestError);
    expect(err).toMatchObject({ code: 'CONFIG_INVALID', retriable: false, field: 'everyMs', message: 'Thing: option everyMs must be an integer ≥ 1, got 0' });
  });
});

describe('forCaller', () => {
  it("passes a caller's error through and turns a misconfiguration or a bug into the internal fault, keeping the cause", () => {
    const bad = new BadRequestError('count must be positive', 'count');
    expect(forCaller(bad)).toBe(bad);
    for (const raw of [
      new OptionsError('Thing', 'everyMs', 'must be ≥ 1'),
      new ConfigError('the layout ran out of time bits; configure a later epoch', 'epoch'),
      new TypeError('x is undefined'),
    ]) {
      const answer = forCaller(raw, 'internal fault while dispensing');
      expect(answer).toBeInstanceOf(IdmintError);
      expect(answer).toMatchObject({ code: 'NOT_READY', status: 503, message: 'internal fault while dispensing; the server logged the details', cause: raw });
      expect(answer.message).not.toContain('everyMs');
    }
  });
});
