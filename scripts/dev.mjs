#!/usr/bin/env node
// `npm run dev`: the distributed topology as processes on this machine. Starts the local servers
// (scripts/infra.sh up), then two API processes, a refill worker and a Kafka responder, with one
// combined log, each line labelled by process. Ctrl-C (or SIGTERM) stops everything it started;
// the local servers keep running (`npm run infra:down` stops them).
//   IDMINT_DEV_PORT   first port (default $IDMINT_PORT, else 8080): api-1 on it, api-2 on +1,
//                     refill +2, responder +3
//   IDMINT_INFRA_DIR  the servers' state (default .infra): its env names them, and the
//                     processes' data directories live under its dev/
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { clearTimeout, setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// infra.sh up writes its env under IDMINT_INFRA_DIR: read that one, not the checkout's.
const infra = process.env.IDMINT_INFRA_DIR || `${root}.infra`;
const base = Number(process.env.IDMINT_DEV_PORT || process.env.IDMINT_PORT || 8080);
if (!Number.isInteger(base) || base < 1 || base > 65532) {
  console.error(`npm run dev: IDMINT_DEV_PORT (or IDMINT_PORT) must be a port number, got "${process.env.IDMINT_DEV_PORT || process.env.IDMINT_PORT}"`);
  process.exit(1);
}

execFileSync('bash', ['scripts/infra.sh', 'up'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
const servers = Object.fromEntries(
  readFileSync(`${infra}/env`, 'utf8')
    .split('\n')
    .map((line) => /^export (\w+)=(.*)$/.exec(line))
    .filter(Boolean)
    .map((m) => [m[1], m[2]]),
);
execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: 'inherit' });

const processes = [
  { label: 'api-1', roles: 'api', port: base },
  { label: 'api-2', roles: 'api', port: base + 1 },
  { label: 'refill', roles: 'refill', port: base + 2 },
  { label: 'responder', roles: 'responder', port: base + 3 },
];
const width = Math.max(...processes.map((p) => p.label.length));
const children = processes.map(({ label, roles, port }) => {
  const child = spawn(process.execPath, ['bin/idmint.js', 'serve'], {
    cwd: root,
    env: { ...process.env, ...servers, IDMINT_ROLES: roles, IDMINT_PORT: String(port), IDMINT_DATA_DIR: `${infra}/dev/${label}` },
    // In this script's process group, so whatever kills the group kills them too: a Ctrl-C reaches
    // each child from the terminal and again from this script's SIGTERM, which a server takes as
    // the same stop request (it comes within a second: src/app/signals.ts).
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => process.stdout.write(`${label.padEnd(width)} | ${line}\n`));
  }
  child.on('exit', (code, signal) => {
    process.stdout.write(`${label.padEnd(width)} | exited (${signal ?? code})\n`);
    if (!stopping) stop(1);
  });
  return child;
});
process.stdout.write(`dev | api on http://127.0.0.1:${base} and :${base + 1}, refill and responder beside them; Ctrl-C stops all\n`);

let stopping = false;
function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  const deadline = setTimeout(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')), 10_000);
  Promise.all(children.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r))))).then(() => {
    clearTimeout(deadline);
    process.exit(code);
  });
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
