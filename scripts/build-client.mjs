#!/usr/bin/env node
// Compiles the SDK (src/client and what it imports: core, the Kafka wire contract) into
// packages/client/dist, the `idmint-client` package: the client without the server's dependencies.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'packages/client/dist');
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'packages/client/tsconfig.json')], { stdio: 'inherit', cwd: root });
