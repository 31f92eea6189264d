import type { Kafka } from 'kafkajs';
import { createIdmintClient, kafkaPoolTransport, type IdmintClient } from '../src/client/index.js';
import { createKafkaClient, type IdmintKafkaClient } from '../src/client/kafka/rpc-client.js';
import { ERROR_CODES } from '../src/core/errors.js';
import type { Ledger } from './ledger.js';
import { TEST_VERIFY_KEY } from '../test/support/signing.js';

/**
 * Load through every path at once, recording each answer in the ledger. Snowflake IDs from any
 * path (a Snowflake tag, the Leaf route, a fallback) share one generator per process, so they go
 * into one ledger, `(snowflake)`; other IDs into their tag's.
 */

export const TAGS = [
  { bizTag: 'chaos-seg', step: 5000 },
  { bizTag: 'chaos-list', step: 2000, pool: 'redis-list' },
  { bizTag: 'chaos-sf', mode: 'snowflake' },
  { bizTag: 'chaos-kpool', step: 1000, pool: 'kafka' },
  { bizTag: 'chaos-sdk', step: 5000 },
] as const;

interface Driver {
  path: string;
  concurrency: number;
  once(): Promise<void>;
}

const CLIENT_TIMEOUT_MS = 5000;

function ledgerTag(bizTag: string, source: string): string {
  return source === 'snowflake' ? '(snowflake)' : bizTag;
}

async function errorCode(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { error?: { code?: string } };
    return body.error?.code ?? `HTTP_${response.status}`;
  } catch {
    return `HTTP_${response.status}`;
  }
}

function thrownCode(err: unknown): string {
  const e = err as { code?: string; name?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'CLIENT_TIMEOUT';
  if (typeof e.code === 'string' && e.code in ERROR_CODES) return e.code;
  return 'CONNECTION';
}

export class Load {
  private stopped = false;
  private readonly running: Promise<void>[] = [];
  private kafkaClient: IdmintKafkaClient | undefined;
  private sdk: IdmintClient | undefined;
  private poolSdk: IdmintClient | undefined;
  private turn = 0;

  constructor(
    private readonly ledger: Ledger,
    private readonly apiUrls: string[],
    private readonly kafka: Kafka,
    /** The region's Kafka namespace (IDMINT_KAFKA_NAMESPACE; default none, idmint's names). */
    private readonly namespace?: string,
  ) {}

  private url(): string {
    return this.apiUrls[this.turn++ % this.apiUrls.length]!;
  }

  private async http(path: string, bizTag: string, route: string, parse: (text: string) => { source: string; ranges: Array<[bigint, bigint]> }): Promise<void> {
    const t0 = performance.now();
    try {
      const base = this.url();
      const response = await fetch(`${base}${route}`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
      if (!response.ok) return this.ledger.error(path, await errorCode(response));
      const { source, ranges } = parse(await response.text());
      this.ledger.record(path, ledgerTag(bizTag, source), source, ranges, performance.now() - t0, base.replace('http://127.0.0.1', ''));
    } catch (err) {
      this.ledger.error(path, thrownCode(err));
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private drivers(): Driver[] {
    const ids = (text: string) => {
      const body = JSON.parse(text) as { ids: string[]; source: string };
      return { source: body.source, ranges: body.ids.map((id) => [BigInt(id), BigInt(id)] as [bigint, bigint]) };
    };
    const blocks = (text: string) => {
      const body = JSON.parse(text) as { blocks: Array<{ start: string; end: string }>; source: string };
      return { source: body.source, ranges: body.blocks.map((b) => [BigInt(b.start), BigInt(b.end)] as [bigint, bigint]) };
    };
    const plain = (source: string) => (text: string) => ({ source, ranges: [[BigInt(text), BigInt(text)]] as Array<[bigint, bigint]> });
    return [
      { path: 'http-ids', concurrency: 2, once: () => this.http('http-ids', 'chaos-seg', '/v1/ids/chaos-seg?count=100', ids) },
      { path: 'http-ids (redis-list)', concurrency: 1, once: () => this.http('http-ids (redis-list)', 'chaos-list', '/v1/ids/chaos-list?count=100', ids) },
      { path: 'http-blocks', concurrency: 2, once: () => this.http('http-blocks', 'chaos-seg', '/v1/blocks/chaos-seg?count=200000', blocks) },
      { path: 'http-ids (snowflake tag)', concurrency: 1, once: () => this.http('http-ids (snowflake tag)', 'chaos-sf', '/v1/ids/chaos-sf?count=100', ids) },
      { path: 'leaf-segment', concurrency: 1, once: () => this.http('leaf-segment', 'chaos-seg', '/api/segment/get/chaos-seg', plain('leaf')) },
      { path: 'leaf-snowflake', concurrency: 1, once: () => this.http('leaf-snowflake', '(snowflake)', '/api/snowflake/get/chaos', plain('snowflake')) },
      { path: 'kafka-request', concurrency: 2, once: () => this.kafkaRequest() },
      { path: 'kafka-pool (sdk)', concurrency: 1, once: () => this.sdkTake('kafka-pool (sdk)', this.poolSdk!, 'chaos-kpool', 'kafka-pool') },
      { path: 'sdk-http (2 servers)', concurrency: 1, once: () => this.sdkTake('sdk-http (2 servers)', this.sdk!, 'chaos-sdk', 'sdk') },
    ];
  }

  private async kafkaRequest(): Promise<void> {
    const t0 = performance.now();
    try {
      const result = await this.kafkaClient!.get('chaos-seg', 50, { timeoutMs: CLIENT_TIMEOUT_MS });
      this.ledger.record(
        'kafka-request',
        ledgerTag('chaos-seg', result.source),
        result.source,
        result.ids.map((id) => [BigInt(id), BigInt(id)]),
        performance.now() - t0,
      );
    } catch (err) {
      this.ledger.error('kafka-request', thrownCode(err));
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** 200 IDs one at a time through an SDK client, recorded as one answer. */
  private async sdkTake(path: string, client: IdmintClient, bizTag: string, source: string): Promise<void> {
    const t0 = performance.now();
    const got: Array<[bigint, bigint]> = [];
    try {
      for (let i = 0; i < 200; i++) {
        const id = await client.next(bizTag);
        got.push([id, id]);
      }
    } catch (err) {
      this.ledger.error(path, thrownCode(err));
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      if (got.length > 0) this.ledger.record(path, bizTag, source, got, performance.now() - t0);
    }
  }

  async start(): Promise<string[]> {
    this.kafkaClient = createKafkaClient({
      verifyKey: TEST_VERIFY_KEY,
      kafka: this.kafka,
      clientId: 'idmint-chaos',
      timeoutMs: CLIENT_TIMEOUT_MS,
      ...(this.namespace ? { namespace: this.namespace } : {}),
    });
    await this.kafkaClient.start();
    this.sdk = createIdmintClient({ urls: this.apiUrls, timeoutMs: CLIENT_TIMEOUT_MS });
    this.poolSdk = createIdmintClient({
      transport: kafkaPoolTransport({ verifyKey: TEST_VERIFY_KEY, kafka: this.kafka, takeTimeoutMs: 2000, namespace: this.namespace }),
      timeoutMs: CLIENT_TIMEOUT_MS,
      batchSize: 100,
    });
    const drivers = this.drivers();
    for (const d of drivers) {
      for (let i = 0; i < d.concurrency; i++) {
        this.running.push(
          (async () => {
            while (!this.stopped) await d.once();
          })(),
        );
      }
    }
    return drivers.map((d) => d.path);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
    await Promise.all([this.kafkaClient?.close(), this.sdk?.close(), this.poolSdk?.close()].map((p) => p?.catch(() => undefined)));
  }
}
