import { describe, expect, it } from 'vitest';
import { makeDecoder } from '../../../src/core/decode.js';
import { MIN_TIME_BASED_ID } from '../../../src/core/layout.js';
import type { BizTag } from '../../../src/core/ports.js';
import { testTag } from '../../support/tags.js';

const decode = makeDecoder();
const tag = (mode: BizTag['mode']): BizTag => testTag('t', { mode });

describe('makeDecoder', () => {
  it('says it decoded by the tag when a tag is given', () => {
    expect(decode(42n, tag('segment'))).toMatchObject({ type: 'segment', layoutFrom: 'bizTag' });
    expect(decode(42n, tag('segment'))).not.toHaveProperty('note');
  });

  it('says it guessed from the value when no tag is given', () => {
    const low = decode(42n, null);
    expect(low).toMatchObject({ type: 'segment', layoutFrom: 'value' });
    expect(low.note).toMatch(/no bizTag given: decoded as segment .*below 2\^53.*pass bizTag/);
    const high = decode(MIN_TIME_BASED_ID + 12345n, null);
    expect(high).toMatchObject({ type: 'snowflake', layoutFrom: 'value' });
    expect(high.note).toMatch(/at or above 2\^53/);
  });

  it('refuses a segment-range ID decoded as a Snowflake tag', () => {
    expect(() => decode(42n, tag('snowflake'))).toThrow(/below 2\^53/);
  });
});
