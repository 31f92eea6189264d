import { describe, expect, it } from 'vitest';
import { kafkaSecurity } from '../../../src/app/connections.js';
import { checkKafkaDriver, isKafkaDriver, openKafka } from '../../../src/kafka/driver.js';
import { createKafka } from '../../../src/kafka/kafkajs/client.js';
import { isKafkaJsInstance, kafkaJsConfig } from '../../../src/kafka/kafkajs/index.js';
import { loadConfig } from '../../../src/app/config.js';

// The seam's own rules: which driver, what a connection option becomes in KafkaJS, what is accepted as `kafka`.
describe('Kafka driver choice and connection options', () => {
  it('knows kafkajs (the default) and platformatic, and names the choices when given another', () => {
    expect(checkKafkaDriver(undefined)).toBe('kafkajs');
    expect(checkKafkaDriver('kafkajs')).toBe('kafkajs');
    expect(checkKafkaDriver('platformatic')).toBe('platformatic');
    expect(() => checkKafkaDriver('librdkafka')).toThrow(/driver.*kafkajs, platformatic.*"librdkafka"/);
    expect(loadConfig({}).IDMINT_KAFKA_DRIVER).toBe('kafkajs');
    expect(loadConfig({ IDMINT_KAFKA_DRIVER: 'platformatic' }).IDMINT_KAFKA_DRIVER).toBe('platformatic');
    expect(() => loadConfig({ IDMINT_KAFKA_DRIVER: 'librdkafka' })).toThrow(/IDMINT_KAFKA_DRIVER/);
  });

  it("maps idmint's TLS, SASL and timeouts onto KafkaJS's settings", () => {
    expect(kafkaJsConfig({ brokers: 'b:1' })).toEqual({});
    expect(kafkaJsConfig({ brokers: 'b:1', tls: true }).ssl).toBe(true);
    expect(kafkaJsConfig({ brokers: 'b:1', tls: { ca: 'PEM', rejectUnauthorized: false } }).ssl).toEqual({ ca: ['PEM'], rejectUnauthorized: false });
    expect(kafkaJsConfig({ brokers: 'b:1', sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'p' } }).sasl).toEqual({
      mechanism: 'scram-sha-512',
      username: 'u',
      password: 'p',
    });
    const quick = kafkaJsConfig({ brokers: 'b:1', retries: 0, connectionTimeoutMs: 200, requestTimeoutMs: 300 });
    expect(quick).toMatchObject({ connectionTimeout: 200, authenticationTimeout: 200, requestTimeout: 300, retry: { retries: 0 } });
  });

  it("the server's TLS and SASL variables become the same connection options", () => {
    const config = loadConfig({
      IDMINT_KAFKA_TLS: 'true',
      IDMINT_KAFKA_SASL_MECHANISM: 'plain',
      IDMINT_KAFKA_SASL_USERNAME: 'u',
      IDMINT_KAFKA_SASL_PASSWORD: 'p',
    });
    expect(kafkaSecurity(config)).toEqual({ tls: true, sasl: { mechanism: 'plain', username: 'u', password: 'p' } });
  });

  it('opens a driver from connection options, a ready driver, or (deprecated) a KafkaJS instance, without connecting', async () => {
    const fromOptions = await openKafka({ brokers: '127.0.0.1:1' });
    expect(isKafkaDriver(fromOptions) && fromOptions.name).toBe('kafkajs');
    expect(await openKafka(fromOptions)).toBe(fromOptions);
    const legacy = createKafka({ brokers: '127.0.0.1:1' });
    expect(isKafkaJsInstance(legacy)).toBe(true);
    expect(isKafkaDriver(legacy)).toBe(false);
    const warned: string[] = [];
    const logger = { warn: (msg: string) => void warned.push(msg) } as never;
    expect((await openKafka(legacy, logger)).name).toBe('kafkajs');
    expect(warned.join('\n')).toMatch(/deprecated/);
    await expect(openKafka({ brokers: '127.0.0.1:1', driver: 'other' as never })).rejects.toThrow(/driver/);
  });

  it("tells its client library's errors, and refused credentials, from others", async () => {
    const { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSSASLAuthenticationError } = await import('kafkajs');
    const driver = await openKafka({ brokers: '127.0.0.1:1' });
    expect(driver.isClientError(new KafkaJSConnectionError('Connection error: ECONNREFUSED'))).toBe(true);
    expect(driver.isClientError(new Error('boom'))).toBe(false);
    // Its types omit the message KafkaJS passes it.
    const refused = new (KafkaJSSASLAuthenticationError as unknown as new (message: string) => Error)('SASL SCRAM SHA512 authentication failed');
    expect(driver.isAuthFailure(refused)).toBe(true);
    expect(driver.isAuthFailure(new KafkaJSNumberOfRetriesExceeded(refused, { retryCount: 1, retryTime: 100 }))).toBe(true);
    expect(driver.isAuthFailure(new KafkaJSConnectionError('Connection timeout'))).toBe(false);
  });
});
