#!/usr/bin/env node
// Runs the TypeScript sources through tsx when they are present (a checkout: never a stale
// build), otherwise the compiled dist/ of a published package.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const source = `${root}src/cli/main.ts`;
if (existsSync(source)) {
  const { tsImport } = await import('tsx/esm/api');
  const { main } = await tsImport(source, import.meta.url);
  await main(process.argv);
} else {
  const { main } = await import(pathToFileURL(`${root}dist/src/cli/main.js`).href);
  await main(process.argv);
}
