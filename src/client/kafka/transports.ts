import type { KafkaSource } from '../../kafka/driver.js';
import { IdmintError, isIdmintError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { KafkaPoolConsumer } from './pool-consumer.js';
import { checkNamespace } from '../../kafka/names.js';
import type { KafkaPoolConsumerSettings } from './pool-consumer.js';
import type { IdmintKafkaClient } from './rpc-client.js';
import type { IdTransport, TransportBatch } from '../transport.js';
import type { Block } from '../../core/block.js';
import { verifierFrom } from './verification.js';

export interface KafkaTransportOptions {
  /** Per request; defaults to the rpc client's own timeout. */
  timeoutMs?: number;
  /** Close the rpc client with the transport. Default false: whoever created it closes it. */
  closeClient?: boolean;
}

/** Kafka request/reply (`idmint.requests`) through the rpc client; it starts on first use. Segment tags come as blocks. */
export function kafkaTransport(client: IdmintKafkaClient, options: KafkaTransportOptions = {}): IdTransport {
  const getOptions = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
  return {
    fetch: async (bizTag, count) => {
      const reply = await client.get(bizTag, count, getOptions);
      return { ids: reply.ids, source: reply.source, ...(reply.format === undefined ? {} : { format: reply.format }) };
    },
    // Segment tags as blocks (`"as":"blocks"`): a reply's size does not grow with the count, and
    // the SDK's counter-speed takes work over Kafka as over HTTP.
    fetchBlocks: async (bizTag, count) => {
      const reply = await client.get(bizTag, count, getOptions, 'blocks');
      return { blocks: reply.blocks, source: reply.source };
    },
    close: async () => {
      if (options.closeClient) await client.close();
    },
  };
}

export interface KafkaPoolTransportOptions extends Partial<KafkaPoolConsumerSettings> {
  /**
   * How to reach Kafka: `{ brokers, clientId, tls, sasl, logger, driver }` (a KafkaJS `Kafka`
   * instance is still accepted, deprecated). The driver is loaded at the first take.
   */
  kafka: KafkaSource;
  /** The deployment's public signing key(s) (`idmint keys public`; default IDMINT_VERIFY_KEY): blocks not signed by it, over their place, are never handed out. */
  verifyKey?: string | readonly string[] | undefined;
  /** Hand out unsigned blocks (whoever can write the pool topic then decides the IDs): logged once. */
  insecureSkipVerify?: boolean | undefined;
  /** The servers' IDMINT_KAFKA_NAMESPACE: pool topics `idmint.<namespace>.ids.<tag>`. Default none. */
  namespace?: string | undefined;
  /**
   * Serves the tag when its pool topic cannot: this instance owns no partition (more instances
   * than partitions), the topic stays dry past the take timeout, or Kafka cannot be reached. Usually `kafkaTransport` or
   * `httpTransport`; closed with this transport.
   */
  fallback?: IdTransport;
  logger?: Logger;
}

/**
 * A tag's IDs straight from its pool topic `idmint.ids.<tag>`, read as the tag's one group
 * (commit before hand-out), as blocks. One consumer per tag, started on first use, closed with
 * the transport. Shard 0 only; without a fallback, a topic that stays dry answers POOL_EMPTY.
 */
export function kafkaPoolTransport(options: KafkaPoolTransportOptions): IdTransport {
  const { kafka, logger, fallback, verifyKey, insecureSkipVerify, namespace, ...settings } = options;
  if (namespace !== undefined) checkNamespace(namespace);
  // Refused here, at construction, without a key (secure by default), not at the first take.
  const { keys } = verifierFrom({ verifyKey, insecureSkipVerify }, 'kafkaPoolTransport');
  const verification = keys ? { verifyKey: keys.publicKeys } : { insecureSkipVerify: true };
  const consumers = new Map<string, KafkaPoolConsumer>();
  let closed = false;
  const fetchBlocks = async (bizTag: string, count: number): Promise<TransportBatch> => {
    if (closed) throw new IdmintError('NOT_READY', 'the Kafka pool transport is closed', { retriable: false });
    let consumer = consumers.get(bizTag);
    if (!consumer) {
      consumer = new KafkaPoolConsumer({ kafka, bizTag, logger, namespace, ...verification, ...settings });
      consumers.set(bizTag, consumer);
    }
    let blocks: Block[];
    try {
      // Without a fallback, an instance that owns no partition waits for one as for a dry topic.
      blocks = await consumer.takeBlocks(count, { waitForPartition: !fallback });
    } catch (err) {
      // A consumer whose start failed (Kafka unreachable, the group join past its deadline), or that
      // its driver stopped after a crash, keeps failing: the next take starts a new one instead of
      // answering NOT_READY for the life of the process.
      if (consumer.failed && consumers.get(bizTag) === consumer) {
        consumers.delete(bizTag);
        void consumer.close().catch(() => undefined);
      }
      // Kafka unreachable (NOT_READY): the fallback may reach the dispenser another way.
      if (!fallback || !isIdmintError(err) || err.code !== 'NOT_READY') throw err;
      blocks = [];
    }
    if (blocks.length > 0) return { blocks, source: 'pool' };
    if (fallback) return fallback.fetchBlocks ? fallback.fetchBlocks(bizTag, count) : fallback.fetch(bizTag, count);
    throw new IdmintError('POOL_EMPTY', `pool topic of "${bizTag}" has no IDs ready; is a refill producing to it?`);
  };
  return {
    fetch: fetchBlocks,
    fetchBlocks,
    async close() {
      closed = true;
      await Promise.all([...consumers.values()].map((c) => c.close()));
      await fallback?.close();
    },
  };
}
