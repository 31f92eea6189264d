import { parseSigningKey, type SigningKey } from '../../src/kafka/signing.js';

/**
 * One fixed Ed25519 key for the tests' own signers (sinks, responders, and the servers they spawn,
 * as IDMINT_SIGNING_KEY) and readers (`verifyKey`). Tests of the deployment's generated key and of
 * rotation make their own (test/integration/kafka/signatures.test.ts, test/e2e/kafka-forgery.test.ts).
 */
export const TEST_SIGNING_SECRET = 'ed25519-secret:BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc';
export const TEST_SIGNING_KEY: SigningKey = parseSigningKey(TEST_SIGNING_SECRET);
export const TEST_VERIFY_KEY = TEST_SIGNING_KEY.publicKey;
/** A sink's or responder's `signer`. */
export const testSigner = (): SigningKey => TEST_SIGNING_KEY;
