import { KafkaJSNonRetriableError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { rebalanceError } from '../../../src/kafka/kafkajs/reader.js';

// KafkaJS builds its protocol errors from the broker's codes; these are its own classes.
const protocol = (type: string, message: string) => new KafkaJSProtocolError({ type, message, code: 0, retriable: true } as never);

describe('rebalanceError: what makes the KafkaJS group reader end its batches and rejoin', () => {
  it('finds a rebalance error bare, or as the cause KafkaJS wrapped after its retries', () => {
    const notCoordinator = protocol('NOT_COORDINATOR_FOR_GROUP', 'This is not the correct coordinator for this group');
    expect(rebalanceError(notCoordinator)).toBe(notCoordinator);
    const exceeded = new KafkaJSNumberOfRetriesExceeded(notCoordinator, { retryCount: 5, retryTime: 2000 });
    expect(rebalanceError(exceeded)).toBe(notCoordinator);
    const unknownMember = protocol('UNKNOWN_MEMBER_ID', 'The coordinator is not aware of this member');
    // KafkaJS's retry wraps a non-retriable error so (src/retry/index.js), its types omit the option.
    const Wrapping = KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error;
    expect(rebalanceError(new Wrapping(unknownMember, { cause: unknownMember }))).toBe(unknownMember);
    for (const type of ['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION']) expect(rebalanceError(protocol(type, type))?.message).toBe(type);
  });

  it('leaves every other error alone', () => {
    expect(rebalanceError(protocol('REQUEST_TIMED_OUT', 'The request timed out'))).toBeUndefined();
    expect(rebalanceError(new KafkaJSNumberOfRetriesExceeded(new Error('Connection closed'), { retryCount: 5, retryTime: 2000 }))).toBeUndefined();
    expect(rebalanceError(new Error('boom'))).toBeUndefined();
    expect(rebalanceError(undefined)).toBeUndefined();
    expect(rebalanceError('a string')).toBeUndefined();
  });
});
