export type ServerVar = 'DATABASE_URL' | 'REDIS_URL' | 'KAFKA_BROKERS' | 'ZK_CONNECT';

/** A server address the vitest global setup (test/support/global-setup.ts) put in the environment. */
export function env(name: ServerVar): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests through vitest (its global setup starts the servers), or source .infra/env`);
  return value;
}
