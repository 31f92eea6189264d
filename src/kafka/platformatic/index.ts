/**
 * The @platformatic/kafka driver: idmint's Kafka ports (../ports.ts) over @platformatic/kafka 2.x
 * (pure TypeScript; Node >= 22.22). Loaded by ../driver.ts only when chosen
 * (IDMINT_KAFKA_DRIVER=platformatic, the SDK's `driver: 'platformatic'`).
 *
 * What it needs worked around, all in this folder: offsets committed with their metadata and
 * fenced by the fetch's generation (commit.ts: the library's commit sends no metadata, and after a
 * rejoin commits again under the new generation), a stream's read-ahead positions forgotten at
 * each join and a partition rewound after a failed batch (reader.ts: the library keeps reading
 * where it had fetched), a failed messages stream reopened, its errors given idmint's `type`
 * (options.ts), keys partitioned as Java's client does (writer.ts). Not needed, unlike KafkaJS:
 * patches of private files (fetch guard, queue guard), rebalance errors unwrapped and rethrown,
 * a check after each commit, admin and producer replaced after a deleted topic, a second client
 * for admin timeouts, a log-line regex.
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
