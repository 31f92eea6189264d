import { createHash } from 'node:crypto';

/**
 * ZooKeeper's digest identity of `user:password`: `user:base64(sha1(user:password))`, what an ACL
 * names and what the deployment record keeps (never the password).
 */
export function digestId(auth: string): string {
  const colon = auth.indexOf(':');
  return `${auth.slice(0, colon)}:${createHash('sha1').update(auth).digest('base64')}`;
}

/** A deployment's ZooKeeper credential (src/app/deployment.ts). */
export interface ZkCredential {
  /** `user:password`. */
  readonly auth: string;
  /** Generated for this deployment, not an operator's IDMINT_ZK_AUTH (see ZkClientOptions.authGenerated). */
  readonly generated: boolean;
}
