import { BadRequestError } from './core/errors.js';
import { LEAF_LAYOUT, MIN_TIME_BASED_ID, UID_LAYOUT, type Layout } from './core/layout.js';
import { SHARDED_LAYOUT } from './core/sharded.js';
import type { BizTag } from './core/types.js';

export interface DecodeLayouts {
  snowflake: Layout;
  uid: Layout;
}

/**
 * Decodes an ID by its tag's mode. Without a tag the value decides: below 2^53 it is a segment
 * ID (a plain number), from 2^53 up a Snowflake ID (invariant 4).
 */
export function makeDecoder(layouts: DecodeLayouts = { snowflake: LEAF_LAYOUT, uid: UID_LAYOUT }) {
  return (id: bigint, tag: BizTag | null): Record<string, unknown> => {
    const mode = tag?.mode ?? (id >= MIN_TIME_BASED_ID ? 'snowflake' : 'segment');
    switch (mode) {
      case 'sharded':
        return { type: 'sharded', ...SHARDED_LAYOUT.decode(id) };
      case 'uid':
        return { type: 'uid', ...layouts.uid.decode(id) };
      case 'segment':
        // A segment tag's fallback IDs are Snowflake IDs; say which one this is.
        if (id >= MIN_TIME_BASED_ID) return { type: 'snowflake', ...layouts.snowflake.decode(id) };
        return { type: 'segment', id: id.toString(), sequence: Number(id) };
      case 'snowflake':
        if (id < MIN_TIME_BASED_ID) throw new BadRequestError(`id ${id} is below 2^53, so it is not a Snowflake ID`, 'id');
        return { type: 'snowflake', ...layouts.snowflake.decode(id) };
    }
  };
}
