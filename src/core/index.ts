// The pure core's public surface, exported by name.
export { Layout, parseId, createLayout, createUidLayout, LEAF_LAYOUT, UID_LAYOUT, UID_DEFAULT_EPOCH, MIN_TIME_BASED_ID } from './layout.js';
export type { LayoutOptions, LayoutFields, DecodedId, TimeUnit } from './layout.js';
export { ShardedLayout, createShardedLayout, SHARDED_LAYOUT, SHARDED_LAYOUT_DEFAULTS } from './sharded.js';
export type { ShardedLayoutOptions, ShardedFields, DecodedShardedId } from './sharded.js';
export { SnowflakeGenerator, SNOWFLAKE_DEFAULTS, assertLayoutUsable, sleepSync } from './snowflake.js';
export type { SnowflakeOptions } from './snowflake.js';
export { DefaultUidGenerator, UidGeneratorBase } from './uid.js';
export type { UidGeneratorOptions } from './uid.js';
export { CachedUidGenerator, CACHED_UID_DEFAULTS, padOnRejectedTake, throwOnRejectedTake } from './cached-uid.js';
export type { CachedUidGeneratorOptions, RingState } from './cached-uid.js';
export { SegmentBuffer, SEGMENT_BUFFER_DEFAULTS } from './segment-buffer.js';
export type { SegmentBufferOptions } from './segment-buffer.js';
