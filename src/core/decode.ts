import { BadRequestError } from './errors.js';
import { LEAF_LAYOUT, MIN_TIME_BASED_ID, UID_LAYOUT, type Layout } from './layout.js';
import { SHARDED_LAYOUT } from './sharded.js';
import type { BizTag } from './ports.js';
import { regionalWorkerIds, regionOf, type RegionLayout } from './region.js';

export interface DecodeLayouts {
  snowflake: Layout;
  uid: Layout;
  /** One region of several: each decoded ID also says its region (from its stripe, or its worker id's high bits). */
  region?: Pick<RegionLayout, 'regions' | 'stripe'>;
}

/**
 * Decodes an ID by its tag's mode. Without a tag the value decides: below 2^53 it is a segment
 * ID (a plain number), from 2^53 up a Snowflake ID (invariant 4).
 */
export function makeDecoder(layouts: DecodeLayouts = { snowflake: LEAF_LAYOUT, uid: UID_LAYOUT }) {
  return (id: bigint, tag: BizTag | null): Record<string, unknown> => {
    if (tag) return { ...byMode(id, tag.mode), layoutFrom: 'bizTag' };
    // Without a tag a uid or sharded ID cannot be told apart from the others: say that it was a guess.
    const fields = byMode(id, id >= MIN_TIME_BASED_ID ? 'snowflake' : 'segment');
    return {
      ...fields,
      layoutFrom: 'value',
      note: `no bizTag given: decoded as ${fields.type} by its value (${id >= MIN_TIME_BASED_ID ? 'at or above' : 'below'} 2^53); pass bizTag to decode uid or sharded IDs by their tag's layout`,
    };
  };

  function byMode(id: bigint, mode: BizTag['mode']): Record<string, unknown> {
    const fields = fieldsOf(id, mode);
    const region = layouts.region;
    if (!region) return fields;
    if (fields.type === 'segment') return { ...fields, region: regionOf(Number(id), region) };
    const layout = fields.type === 'snowflake' ? layouts.snowflake : fields.type === 'uid' ? layouts.uid : undefined;
    if (!layout || typeof fields.worker !== 'number') return fields;
    return { ...fields, region: regionalWorkerIds({ regions: region.regions, region: 0 }, layout.maxWorkerId).regionOf(fields.worker) };
  }

  function fieldsOf(id: bigint, mode: BizTag['mode']): Record<string, unknown> {
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
  }
}
