import { BadRequestError } from '../../core/errors.js';
import { parseVerifyKeys, type VerifyKeys } from '../../kafka/signing.js';

/** What a Kafka reader of the SDK checks signatures with; `keys` undefined only with insecureSkipVerify. */
export interface Verification {
  readonly keys: VerifyKeys | undefined;
}

/**
 * Secure by default: a Kafka pool reader or rpc client verifies what it reads with the deployment's
 * public key (`verifyKey`, else IDMINT_VERIFY_KEY), and refuses to be built without one unless told
 * `insecureSkipVerify: true`, since then whoever can write the topics decides the IDs it hands out.
 */
export function verifierFrom(
  options: { verifyKey?: string | readonly string[] | undefined; insecureSkipVerify?: boolean | undefined },
  component: string,
): Verification {
  const given = options.verifyKey ?? (process.env.IDMINT_VERIFY_KEY || undefined);
  if (given !== undefined) return { keys: parseVerifyKeys(given, options.verifyKey !== undefined ? 'verifyKey' : 'IDMINT_VERIFY_KEY') };
  if (options.insecureSkipVerify === true) return { keys: undefined };
  throw new BadRequestError(
    `${component}: Kafka pool blocks and replies are signed by the deployment; give verifyKey (or IDMINT_VERIFY_KEY) the output of \`idmint keys public\`, ` +
      'or insecureSkipVerify: true to accept unsigned data (anyone who can write the topics could then make this client hand out IDs twice)',
    'verifyKey',
  );
}
