import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { logLevel } from 'kafkajs';
import { createLogger } from '../../../src/app/log.js';
import { isExpectedKafkaCondition, parseBrokers, pinoLogCreator } from '../../../src/kafka/kafkajs/client.js';

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger({ level, destination }) };
}

const entry = (level: logLevel, message: string) => ({
  namespace: 'Consumer',
  level,
  label: 'X',
  log: { timestamp: '2026-01-01T00:00:00.000Z', message, groupId: 'g1' },
});

describe('KafkaJS logs into pino', () => {
  it('maps KafkaJS levels to pino, with INFO demoted to debug, keeping the fields', async () => {
    const { lines, logger } = capture('trace');
    const log = pinoLogCreator(logger)(logLevel.DEBUG);
    log(entry(logLevel.ERROR, 'broken'));
    log(entry(logLevel.WARN, 'odd'));
    log(entry(logLevel.INFO, 'joined'));
    log(entry(logLevel.DEBUG, 'chatter'));
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.level, l.msg, l.kafkajs, l.groupId])).toEqual([
      [50, 'broken', 'Consumer', 'g1'],
      [40, 'odd', 'Consumer', 'g1'],
      [20, 'joined', 'Consumer', 'g1'],
      [10, 'chatter', 'Consumer', 'g1'],
    ]);
    expect(lines[0]).not.toHaveProperty('timestamp');
  });

  it('is quiet by default: an info logger prints KafkaJS warnings, not its INFO chatter', async () => {
    const { lines, logger } = capture('info');
    const log = pinoLogCreator(logger)(logLevel.WARN);
    log(entry(logLevel.INFO, 'joined'));
    log(entry(logLevel.WARN, 'odd'));
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => l.msg)).toEqual(['odd']);
  });

  it("demotes a consumer's restart after an expected crash, and keeps it loud after a real one", async () => {
    const { lines, logger } = capture('info');
    const log = pinoLogCreator(logger)(logLevel.WARN);
    // A fresh Kafka 4 broker: the first JoinGroup meets a coordinator still loading.
    log(entry(logLevel.ERROR, "Crash: KafkaJSNumberOfRetriesExceeded: The coordinator is loading and hence can't process requests"));
    log(entry(logLevel.ERROR, 'Restarting the consumer in 100ms'));
    log(entry(logLevel.ERROR, 'Crash: KafkaJSProtocolError: Group authorization failed'));
    log(entry(logLevel.ERROR, 'Restarting the consumer in 300ms'));
    // A restart with no crash remembered (another group's, or a second line) stays loud too.
    log(entry(logLevel.ERROR, 'Restarting the consumer in 100ms'));
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [50, 'Crash: KafkaJSProtocolError: Group authorization failed'],
      [50, 'Restarting the consumer in 300ms'],
      [50, 'Restarting the consumer in 100ms'],
    ]);
  });

  it('parses broker lists from KAFKA_BROKERS or an array', () => {
    expect(parseBrokers(' a:1, b:2 ,')).toEqual(['a:1', 'b:2']);
    expect(parseBrokers(['a:1 ', ''])).toEqual(['a:1']);
  });
});

describe("KafkaJS's retried start-up conditions", () => {
  it.each([
    ['Response GroupCoordinator(key: 10, version: 2)', 'The group coordinator is not available'],
    ['Response OffsetFetch(key: 9, version: 2)', 'This is not the correct coordinator for this group'],
    ['Response JoinGroup(key: 11, version: 5)', "The coordinator is loading and hence can't process requests"],
    ['Response Metadata(key: 3, version: 6)', 'There is no leader for this topic-partition as we are in the middle of a leadership election'],
    ['Response Metadata(key: 3, version: 6)', 'This server does not host this topic-partition'],
    ['Producer configured with retries greater than 0 may invalidate EoS guarantees', undefined],
  ])('%s (%s) is logged at debug', (message, error) => {
    expect(isExpectedKafkaCondition(message, error)).toBe(true);
  });

  it('other errors keep their level', () => {
    expect(isExpectedKafkaCondition('Response SaslAuthenticate(key: 36, version: 1)', 'Authentication failed')).toBe(false);
    expect(isExpectedKafkaCondition('Connection error: connect ECONNREFUSED 127.0.0.1:9092', undefined)).toBe(false);
  });
});

describe('KafkaJS while Kafka cannot be reached', () => {
  it('is one episode: a warn line, the rest at debug, and a line when a consumer joins again', async () => {
    const { lines, logger } = capture('info');
    const log = pinoLogCreator(logger)(logLevel.INFO);
    for (let i = 0; i < 50; i++) {
      log(entry(logLevel.ERROR, 'Connection error: connect ECONNREFUSED 127.0.0.1:19092'));
      log(
        entry(logLevel.ERROR, 'Failed to connect to seed broker, trying another broker from the list: Connection error: connect ECONNREFUSED 127.0.0.1:19092'),
      );
      log(entry(logLevel.ERROR, 'Crash: KafkaJSNumberOfRetriesExceeded: Connection error: connect ECONNREFUSED 127.0.0.1:19092'));
      log(entry(logLevel.ERROR, 'Restarting the consumer in 739.5ms'));
    }
    log(entry(logLevel.INFO, 'Consumer has joined the group'));
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.level, String(l.msg).split(' (')[0]!.split(':')[0]])).toEqual([
      [40, 'Kafka unreachable; its clients keep retrying'],
      [30, 'Kafka unreachable; its clients keep retrying'],
    ]);
    expect(lines[0]).toMatchObject({ dependency: 'kafka' });
    expect(String(lines[1]!.msg)).toMatch(/recovered after/);
  });
});
