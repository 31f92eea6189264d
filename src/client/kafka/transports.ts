import type { Kafka } from 'kafkajs';
import { IdmintError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { KafkaPoolConsumer } from './pool-consumer.js';
import type { KafkaPoolConsumerSettings } from './pool-consumer.js';
import type { IdmintKafkaClient } from './rpc-client.js';
import type { IdTransport } from '../transport.js';

export interface KafkaTransportOptions {
  /** Per request; defaults to the rpc client's own timeout. */
  timeoutMs?: number;
  /** Close the rpc client with the transport. Default false: whoever created it closes it. */
  closeClient?: boolean;
}

/** Kafka request/reply (`idmint.requests`) through the rpc client; it starts on first use. */
export function kafkaTransport(client: IdmintKafkaClient, options: KafkaTransportOptions = {}): IdTransport {
  const getOptions = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
  return {
    fetch: async (bizTag, count) => {
      const reply = await client.get(bizTag, count, getOptions);
      return { ids: reply.ids, source: reply.source, ...(reply.format === undefined ? {} : { format: reply.format }) };
    },
    close: async () => {
      if (options.closeClient) await client.close();
    },
  };
}

export interface KafkaPoolTransportOptions extends Partial<KafkaPoolConsumerSettings> {
  kafka: Kafka;
  logger?: Logger;
}

/**
 * A tag's IDs straight from its pool topic `idmint.ids.<tag>`, read as the tag's one group
 * (commit before hand-out). One consumer per tag, started on first use, closed with the
 * transport. Shard 0 only; a topic that stays dry answers POOL_EMPTY.
 */
export function kafkaPoolTransport(options: KafkaPoolTransportOptions): IdTransport {
  const { kafka, logger, ...settings } = options;
  const consumers = new Map<string, KafkaPoolConsumer>();
  let closed = false;
  return {
    async fetch(bizTag, count) {
      if (closed) throw new IdmintError('NOT_READY', 'the Kafka pool transport is closed', { retriable: false });
      let consumer = consumers.get(bizTag);
      if (!consumer) {
        consumer = new KafkaPoolConsumer({ kafka, bizTag, logger, ...settings });
        consumers.set(bizTag, consumer);
      }
      const ids = await consumer.take(count);
      if (ids.length === 0) throw new IdmintError('POOL_EMPTY', `pool topic of "${bizTag}" has no IDs ready; is a refill producing to it?`);
      return { ids, source: 'pool' };
    },
    async close() {
      closed = true;
      await Promise.all([...consumers.values()].map((c) => c.close()));
    },
  };
}
