/**
 * The @platformatic/kafka driver: idmint's Kafka ports (../ports.ts) over @platformatic/kafka 2.x
 * (pure TypeScript; Node >= 22.22). Loaded by ../driver.ts only when chosen
 * (IDMINT_KAFKA_DRIVER=platformatic, the SDK's `driver: 'platformatic'`).
 *
 * What it needs worked around, all in this folder: offsets committed with their metadata and
 * fenced by the fetch's generation (commit.ts: the library's commit sends no metadata and
 * recommits after a rejoin), its errors given idmint's `type` (options.ts), a keyed record
 * partitioned as Java's client does (writer.ts), a failed messages stream reopened (reader.ts).
 * None of KafkaJS's runtime patches, watchdog-only stall detection, rebalance unwrapping,
 * commit re-check, admin replacement or log-line demotion is needed.
 */
import type { Logger } from '../../core/logger.js';
import { silentLogger } from '../../core/logger.js';
import type { GroupReaderOptions, KafkaConnectionOptions, KafkaDriver, TopicWriterOptions } from '../ports.js';
import { PlatformaticTopicAdmin } from './admin.js';
import { isLibraryAuthFailure, isLibraryError, platformaticOptions } from './options.js';
import { PlatformaticGroupReader } from './reader.js';
import { PlatformaticTopicWriter } from './writer.js';

export function platformaticDriver(options: KafkaConnectionOptions, fallback: Logger = silentLogger): KafkaDriver {
  const base = platformaticOptions(options);
  // `options` may be a KafkaJS instance carrying connection options (tests): its `logger` is a method.
  const logger = typeof options.logger?.child === 'function' ? options.logger : fallback;
  const log = logger.child({ component: 'platformatic-kafka' });
  return {
    name: 'platformatic',
    admin: () => new PlatformaticTopicAdmin(base),
    writer: (o: TopicWriterOptions = {}) => new PlatformaticTopicWriter(base, log, o.appendOnce ?? false),
    reader: (o: GroupReaderOptions) => new PlatformaticGroupReader(base, o, log),
    isClientError: isLibraryError,
    isAuthFailure: isLibraryAuthFailure,
  };
}
