import { appendFileSync } from 'node:fs';

const out = process.env.IDMINT_TEST_IMPORTS_FILE;

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const name = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(resolved.url)?.[1];
  if (out && name && !/node_modules/.test(context.parentURL ?? '')) appendFileSync(out, `${name}\n`);
  return resolved;
}
