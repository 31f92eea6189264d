#!/usr/bin/env node
// Runs the compiled dist/ when it is built from the current sources (an installed package, or a
// checkout after `npm run build` / `npm start`), otherwise the TypeScript sources through tsx
// (a checkout being edited: never a stale build; IDMINT_RUN_SOURCES=1 forces this).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { distIsFresh } from './freshness.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const source = `${root}src/cli/main.ts`;
if (existsSync(source) && (process.env.IDMINT_RUN_SOURCES === '1' || !distIsFresh(root))) {
  const { tsImport } = await import('tsx/esm/api');
  const { main } = await tsImport(source, import.meta.url);
  await main(process.argv);
} else {
  const { main } = await import(pathToFileURL(`${root}dist/src/cli/main.js`).href);
  await main(process.argv);
}
