// Whether dist/ was built from the sources as they are now: the build writes dist/.build-stamp,
// and any source, workers file or tsconfig newer than it makes the build stale. Shared by
// bin/idmint.js (which runs dist/ only when fresh) and scripts/build.mjs (--if-stale).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function newestSourceMtime(root) {
  let newest = 0;
  const visit = (dir) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) visit(path);
      else if (/\.(ts|lua|json)$/.test(e.name)) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  visit(join(root, 'src'));
  visit(join(root, 'workers'));
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'package.json']) {
    try {
      newest = Math.max(newest, statSync(join(root, f)).mtimeMs);
    } catch {
      // not in a published package
    }
  }
  return newest;
}

/** True when dist/ exists and no source is newer than its stamp (or there are no sources at all). */
export function distIsFresh(root) {
  let stamp;
  try {
    stamp = statSync(join(root, 'dist', '.build-stamp')).mtimeMs;
  } catch {
    return false;
  }
  return newestSourceMtime(root) <= stamp;
}
