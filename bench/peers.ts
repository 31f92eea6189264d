/**
 * Side by side with a peer: alternating load rounds against any peer's URL and idmint's, then the
 * medians and the ratio. Point it at your own Leaf, Tinyid or CosId:
 *
 *   npm run bench:peers -- --peer http://leaf:8080/api/segment/get/order \
 *                          --idmint http://127.0.0.1:8080/api/segment/get/order [--rounds 5] [--seconds 10] [--connections 32]
 *
 * Both URLs must answer 200 to a GET (idmint's Leaf routes take Leaf's paths). Rounds alternate
 * (peer, idmint, peer, ...) so drift on a shared machine hits both alike. The load generator is
 * wrk when installed (`apt-get install wrk`: C, little CPU of its own), else autocannon.
 * Prints a Markdown table; exit 1 if a round had errors or non-2xx answers.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { median, perSecond, table } from './lib.js';

export interface Round {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

const run = promisify(execFile);

async function hasWrk(): Promise<boolean> {
  try {
    await run('wrk', ['--version']);
    return true;
  } catch (err) {
    // wrk --version exits 1 after printing its version.
    return /^wrk /m.test(String((err as { stdout?: string }).stdout ?? ''));
  }
}

/** wrk's latency figures: `50%  1.23ms`, `99%  800.00us`, `2.1s`. */
function millis(text: string, label: string): number {
  const m = new RegExp(`^\\s*${label}\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(text);
  if (!m) return Number.NaN;
  const value = Number(m[1]);
  return m[2] === 'us' ? value / 1000 : m[2] === 's' ? value * 1000 : value;
}

const pipelineScripts = new Map<number, string>();

/** wrk sends `depth` requests per write with this script (wrk has no pipelining flag of its own); written once per depth. */
function pipelineScript(depth: number): string {
  const known = pipelineScripts.get(depth);
  if (known) return known;
  const file = join(tmpdir(), `idmint-wrk-pipeline-${process.pid}-${depth}.lua`);
  writeFileSync(
    file,
    [
      'init = function(args)',
      '  local r = {}',
      `  for i = 1, ${depth} do r[i] = wrk.format(nil) end`,
      '  req = table.concat(r)',
      'end',
      'request = function() return req end',
      '',
    ].join('\n'),
  );
  pipelineScripts.set(depth, file);
  return file;
}

/**
 * One load round against `url`: requests/s, p50 and p99 in ms, errors (socket errors and non-2xx).
 * `pipeline` > 1 sends that many requests per write on each connection: the load generator then
 * costs little CPU per request, so the server's own capacity shows on a machine where both share
 * the cores (latency figures then count a whole batch, so read tails from unpipelined rounds).
 */
export async function loadRound(url: string, seconds: number, connections: number, pipeline = 1): Promise<Round> {
  if (await hasWrk()) {
    const script = pipeline > 1 ? ['-s', pipelineScript(pipeline)] : [];
    const { stdout } = await run('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', ...script, url], { maxBuffer: 1 << 20 });
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? Number.NaN);
    const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0);
    const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
    const errors = non2xx + (socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0);
    return { requestsPerSecond: rps, p50Ms: millis(stdout, '50%'), p99Ms: millis(stdout, '99%'), errors };
  }
  const result = await autocannon({ url, connections, duration: seconds, pipelining: pipeline });
  return { requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, errors: result.errors + result.non2xx };
}

export async function loadGenerator(): Promise<string> {
  return (await hasWrk()) ? 'wrk -t1' : 'autocannon (in process)';
}

/** Alternating rounds against two URLs: `a` first, then `b`, `rounds` times. */
export async function alternate(a: string, b: string, options: { rounds: number; seconds: number; connections: number }): Promise<{ a: Round[]; b: Round[] }> {
  const out = { a: [] as Round[], b: [] as Round[] };
  for (let i = 0; i < options.rounds; i++) {
    out.a.push(await loadRound(a, options.seconds, options.connections));
    out.b.push(await loadRound(b, options.seconds, options.connections));
  }
  return out;
}

export function summary(name: string, rounds: Round[]): Array<string | number> {
  return [
    name,
    perSecond(median(rounds.map((r) => r.requestsPerSecond))),
    median(rounds.map((r) => r.p50Ms)).toFixed(2),
    median(rounds.map((r) => r.p99Ms)).toFixed(2),
    Math.max(...rounds.map((r) => r.p99Ms)).toFixed(2),
    rounds.reduce((sum, r) => sum + r.errors, 0),
  ];
}

export const SUMMARY_HEADERS = ['target', 'req/s (median)', 'p50 ms (median)', 'p99 ms (median)', 'p99 ms (worst round)', 'errors'];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback?: string): string | undefined => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : fallback;
  };
  const peer = flag('peer');
  const idmint = flag('idmint');
  if (!peer || !idmint) {
    console.error('usage: npm run bench:peers -- --peer <url> --idmint <url> [--rounds 5] [--seconds 10] [--connections 32]');
    process.exit(2);
  }
  const options = { rounds: Number(flag('rounds', '5')), seconds: Number(flag('seconds', '10')), connections: Number(flag('connections', '32')) };
  for (const url of [peer, idmint]) {
    const response = await fetch(url).catch((err: unknown) => ({ ok: false, status: String(err) }));
    if (!response.ok) {
      console.error(`${url} did not answer 200 (${response.status}); check the URL`);
      process.exit(1);
    }
  }
  console.error(`bench:peers: ${options.rounds} alternating rounds of ${options.seconds} s, ${options.connections} connections, ${await loadGenerator()}`);
  const { a, b } = await alternate(peer, idmint, options);
  const ratio = median(b.map((r) => r.requestsPerSecond)) / median(a.map((r) => r.requestsPerSecond));
  console.log(table(SUMMARY_HEADERS, [summary(`peer ${peer}`, a), summary(`idmint ${idmint}`, b)]));
  console.log(`\nidmint / peer requests/s (medians): ${ratio.toFixed(2)} ×`);
  if ([...a, ...b].some((r) => r.errors > 0)) process.exit(1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
