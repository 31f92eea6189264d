#!/usr/bin/env node
// How long an HTTP-only application takes to import `idmint/client` (compiled, dist/), each run in
// a fresh Node process: `node bench/client-import.mjs [runs] [entry ...]` prints the median, min
// and max of `await import(entry)` plus building an httpTransport, in ms. Several entries (e.g. a
// copy of an older dist/) are run in turn, so a drifting machine moves them alike.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const runs = Number(process.argv[2] ?? 21);
const entries = process.argv.length > 3 ? process.argv.slice(3) : [fileURLToPath(new URL('../dist/src/client/index.js', import.meta.url))];
const probe = (entry) =>
  `const t = performance.now(); const m = await import(${JSON.stringify(entry)}); m.httpTransport({ url: 'http://127.0.0.1:1' }); console.log(performance.now() - t);`;
const times = new Map(entries.map((e) => [e, []]));
for (let i = 0; i < runs; i++) {
  for (const entry of entries) times.get(entry).push(Number(execFileSync(process.execPath, ['--input-type=module', '-e', probe(entry)], { encoding: 'utf8' })));
}
for (const [entry, ms] of times) {
  ms.sort((a, b) => a - b);
  console.log(`${entry}: median ${ms[Math.floor(ms.length / 2)].toFixed(1)} ms, min ${ms[0].toFixed(1)}, max ${ms.at(-1).toFixed(1)} (${ms.length} runs)`);
}
