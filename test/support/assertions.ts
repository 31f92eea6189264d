import { expect } from 'vitest';
import { IdmintError } from '../../src/core/errors.js';

/** The IdmintError a promise rejects with; fails the test if it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<IdmintError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(IdmintError);
  return err as IdmintError;
}
