import type { BizTag } from '../../src/core/ports.js';

/** A tag's settings as the store would return them: a segment tag with defaults, and what the test overrides. */
export function testTag(bizTag: string, overrides: Partial<BizTag> = {}): BizTag {
  const now = new Date();
  return {
    bizTag,
    mode: 'segment',
    step: 1000,
    maxLimit: null,
    shards: 1,
    fallback: 'segment',
    pool: 'auto',
    format: 'decimal',
    description: '',
    createdAt: now,
    updatedAt: now,
    ...overrides,
  };
}
