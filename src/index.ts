// idmint's public surface, exported by name: what an application embeds or extends.
// Lower-level pieces stay reachable through their folders' index files.
export {
  ERROR_CODES,
  IdmintError,
  ClockBackwardsError,
  SegmentExhaustedError,
  UnknownBizTagError,
  BadRequestError,
  ConfigError,
  TimeoutError,
  isIdmintError,
} from './core/errors.js';
export type { ErrorCode, IdmintErrorOptions } from './core/errors.js';
export { BIZ_TAG_PATTERN, MAX_SEGMENT_ID, systemClock } from './core/ports.js';
export type {
  BizMode,
  BizStore,
  BizTag,
  BizTagInput,
  BizTagPatch,
  Clock,
  DispenseResult,
  FallbackPolicy,
  IdDispenser,
  IdSource,
  IdSourceName,
  PoolKind,
  PoolSink,
  Segment,
  SegmentAllocator,
  TakeContext,
  WorkerIdLease,
  WorkerIdProvider,
} from './core/ports.js';
export {
  Layout,
  createLayout,
  createUidLayout,
  LEAF_LAYOUT,
  UID_LAYOUT,
  SnowflakeGenerator,
  CachedUidGenerator,
  DefaultUidGenerator,
  SegmentBuffer,
  ShardedLayout,
  SHARDED_LAYOUT,
} from './core/index.js';
export { Dispenser, DISPENSER_DEFAULTS } from './dispenser/dispenser.js';
export type { DispenserOptions, DispenserPlugin, DispenseRequest, RejectionHandler, PoolSources } from './dispenser/dispenser.js';
export { loadConfig, envSchema } from './app/config.js';
export type { Config } from './app/config.js';
export { createLogger } from './app/log.js';
export { startRuntime, rolesFrom } from './app/runtime.js';
export type { Runtime, RuntimeOptions, Role } from './app/runtime.js';
export { buildHttpServer } from './http/server.js';
export type { HttpServerOptions, ReadinessReport } from './http/server.js';
export { createPgDatabase, createPgliteDatabase, migrate, PostgresBizStore } from './store/index.js';
export { createSnowflakeSource, SnowflakeSource } from './dispenser/sources/snowflake.js';
export { createSnowflakeSourceFromConfig } from './app/worker-id.js';
export { createIdmintClient, httpTransport } from './client/index.js';
