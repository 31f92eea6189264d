#!/usr/bin/env node
// Runs the compiled CLI when `npm run build` has produced dist/, otherwise the TypeScript
// sources through tsx, so `npx idmint` works straight after `npm install`.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const compiled = `${root}dist/src/cli/main.js`;
if (existsSync(compiled)) {
  const { main } = await import(pathToFileURL(compiled).href);
  await main(process.argv);
} else {
  const { tsImport } = await import('tsx/esm/api');
  const { main } = await tsImport(`${root}src/cli/main.ts`, import.meta.url);
  await main(process.argv);
}
