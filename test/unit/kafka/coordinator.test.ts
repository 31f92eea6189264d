import { describe, expect, it } from 'vitest';
import { isCoordinatorMoving } from '../../../src/kafka/errors.js';

// KafkaJS builds its protocol errors from the code (its own createErrorFromCode), with the protocol's older type names.

describe('isCoordinatorMoving', () => {
  it('matches the coordinator errors KafkaJS raises on a fresh or restarted broker (codes 14, 15, 16)', async () => {
    const { createErrorFromCode } = (await import('kafkajs/src/protocol/error.js' as string)) as { createErrorFromCode(code: number): Error };
    for (const code of [14, 15, 16]) expect(isCoordinatorMoving(createErrorFromCode(code)), `code ${code}`).toBe(true);
    expect(isCoordinatorMoving(createErrorFromCode(3))).toBe(false);
    expect(isCoordinatorMoving(null)).toBe(false);
  });
});
