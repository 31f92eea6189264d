import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

/**
 * vitest globalSetup for the integration and e2e projects.
 * Uses the servers the environment names (KAFKA_BROKERS, ZK_CONNECT, REDIS_URL, DATABASE_URL);
 * otherwise runs `scripts/infra.sh up` and loads .infra/env. Servers stay up afterwards so a
 * rerun is fast; `npm run infra:down` stops them.
 */

export const INFRA_VARS = ['KAFKA_BROKERS', 'ZK_CONNECT', 'REDIS_URL', 'DATABASE_URL'] as const;
export type InfraVar = (typeof INFRA_VARS)[number];
export type InfraEnv = Record<InfraVar, string>;

declare module 'vitest' {
  export interface ProvidedContext {
    infraEnv: InfraEnv;
  }
}

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Parses the `export NAME=value` lines infra.sh writes. */
export function parseEnvFile(text: string): Partial<InfraEnv> {
  const out: Partial<InfraEnv> = {};
  for (const line of text.split('\n')) {
    const m = /^export ([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m && (INFRA_VARS as readonly string[]).includes(m[1]!)) out[m[1] as InfraVar] = m[2]!;
  }
  return out;
}

function bringUp(): InfraEnv {
  try {
    // Partly set env vars pass through: infra.sh uses those servers and starts the rest.
    execFileSync('bash', [`${root}scripts/infra.sh`, 'up'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 600_000,
    });
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(`scripts/infra.sh up failed: ${e.stderr?.toString() ?? e.message}`, { cause: err });
  }
  const env = parseEnvFile(readFileSync(`${root}.infra/env`, 'utf8'));
  const missing = INFRA_VARS.filter((k) => !env[k]);
  if (missing.length > 0) throw new Error(`.infra/env lacks ${missing.join(', ')}`);
  return env as InfraEnv;
}

export default function setup(project: TestProject): void {
  const named = INFRA_VARS.every((k) => process.env[k]);
  const env: InfraEnv = named ? (Object.fromEntries(INFRA_VARS.map((k) => [k, process.env[k]!])) as InfraEnv) : bringUp();
  // Workers are spawned after globalSetup and inherit process.env; provide() also reaches them.
  Object.assign(process.env, env);
  project.provide('infraEnv', env);
}
