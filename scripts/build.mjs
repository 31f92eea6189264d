#!/usr/bin/env node
// Compiles src/ and workers/ to dist/ and stamps it. `--if-stale` skips the compile when dist/
// is already built from the current sources (what `npm start` runs first).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { distIsFresh } from '../bin/freshness.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
if (process.argv.includes('--if-stale') && distIsFresh(root)) process.exit(0);
const started = Date.now();
// npm start compiles only when a source changed: a compile takes seconds, so it says so first.
if (process.argv.includes('--if-stale')) process.stderr.write('idmint: compiling the sources to dist/ (not built yet, or a source changed since)...\n');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
mkdirSync(join(root, 'dist'), { recursive: true });
writeFileSync(join(root, 'dist', '.build-stamp'), `${new Date().toISOString()}\n`);
if (process.argv.includes('--if-stale')) process.stderr.write(`idmint: compiled the sources to dist/ in ${Date.now() - started} ms\n`);
