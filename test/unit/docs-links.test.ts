import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { marked, type Token, type Tokens } from 'marked';
import { describe, expect, it } from 'vitest';

// The README is the path a new user walks; the reference lives in docs/. A page moved or a heading
// renamed must not leave a link pointing nowhere, and no page may fall out of the README's list.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = readdirSync(join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const PAGES = ['README.md', ...DOCS];

/** GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(tokens: Token[]): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const token of tokens) {
    if (token.type !== 'heading') continue;
    const text = (token as Tokens.Heading).text.replace(/<[^>]*>/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function links(tokens: Token[] | undefined, into: string[] = []): string[] {
  for (const token of tokens ?? []) {
    if (token.type === 'link' || token.type === 'image') into.push((token as Tokens.Link).href);
    const nested = token as { tokens?: Token[]; items?: Token[]; header?: { tokens: Token[] }[]; rows?: { tokens: Token[] }[][] };
    links(nested.tokens, into);
    links(nested.items, into);
    for (const cell of nested.header ?? []) links(cell.tokens, into);
    for (const row of nested.rows ?? []) for (const cell of row) links(cell.tokens, into);
  }
  return into;
}

const lexed = new Map(PAGES.map((page) => [page, marked.lexer(readFileSync(join(ROOT, page), 'utf8'))]));

describe('docs', () => {
  it.each(PAGES)('every relative link in %s points to a file and heading that exist', (page) => {
    const broken: string[] = [];
    for (const href of links(lexed.get(page))) {
      if (/^[a-z]+:/i.test(href)) continue;
      const [path, anchor] = href.split('#') as [string, string | undefined];
      const target = path === '' ? page : relative(ROOT, join(ROOT, dirname(page), decodeURI(path)));
      if (!existsSync(join(ROOT, target))) broken.push(`${href} (no file ${target})`);
      else if (anchor && target.endsWith('.md')) {
        const tokens = lexed.get(target) ?? marked.lexer(readFileSync(join(ROOT, target), 'utf8'));
        if (!anchors(tokens).has(anchor)) broken.push(`${href} (no heading #${anchor} in ${target})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('the README links every page under docs/', () => {
    const linked = new Set(links(lexed.get('README.md')).map((href) => href.split('#')[0]));
    expect(DOCS.filter((page) => !linked.has(page))).toEqual([]);
  });

  it('marks no block under docs/ to run: only the README runs its blocks (test/e2e/readme.test.ts)', () => {
    const runnable = DOCS.filter((page) => /<!-- test: (embedded|distributed) -->/.test(readFileSync(join(ROOT, page), 'utf8')));
    expect(runnable).toEqual([]);
  });
});
