import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { marked, type Tokens } from 'marked';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/spawn.js';

/**
 * The README runs as written: every `sh` and `ts` block is marked `<!-- test: embedded -->`,
 * `<!-- test: distributed -->` or `<!-- test: skip: <why> -->`, and the blocks of a session run
 * in order, in one shell, on a clean copy of the checkout, as a user pastes them. The blocks follow
 * `IDMINT_PORT` themselves (`${IDMINT_PORT:-8080}`), so the harness only sets it to a free port P
 * (with P+1..P+3 free too for `npm run dev`). What the harness changes, and only that:
 * `npm install` (the copy shares this
 * checkout's node_modules and dist/), a `ts` block (saved to a file and run with tsx), a
 * `# {...}` comment under a command (its expected output, compared), and `npm start` (run in the
 * background, awaited on /readyz, stopped at the end). The distributed session gets its own
 * Postgres schema, Redis key prefix and Kafka request topic, so it shares the local servers
 * with the other tests without touching their data.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
type Session = 'embedded' | 'distributed';
interface Block {
  session: Session | 'skip';
  lang: string;
  text: string;
}

function readmeBlocks(): Block[] {
  const blocks: Block[] = [];
  let marker: string | undefined;
  for (const token of marked.lexer(readFileSync(join(ROOT, 'README.md'), 'utf8'))) {
    if (token.type === 'space') continue;
    if (token.type === 'code' && ['sh', 'ts'].includes((token as Tokens.Code).lang ?? '')) {
      const { lang, text } = token as Tokens.Code;
      const session = /^<!-- test: (embedded|distributed|skip: .+) -->$/.exec(marker ?? '')?.[1];
      if (!session) throw new Error(`README block without a <!-- test: ... --> marker:\n${text}`);
      blocks.push({ session: session.startsWith('skip') ? 'skip' : (session as Session), lang: lang!, text });
    }
    marker = token.type === 'html' ? token.raw.trim() : undefined;
  }
  return blocks;
}

/** A clean copy: the files git knows (committed or not ignored), this checkout's node_modules and dist/. */
function cleanCopy(): string {
  // The SDK snippets import `idmint/client`, i.e. dist/: build it if a source changed since.
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'ignore' });
  const dir = mkdtempSync(join(tmpdir(), 'idmint-readme-'));
  const files = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).stdout.split('\0');
  for (const file of files.filter((f) => f && existsSync(join(ROOT, f)))) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(ROOT, file), join(dir, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  if (existsSync(join(ROOT, 'dist'))) cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  return dir;
}

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** A free port P with P+1..P+3 free too (npm run dev takes four). */
async function fourFreePorts(): Promise<number> {
  for (;;) {
    const base = await freePort();
    if (base > 65_000) continue;
    const free = await Promise.all(
      [1, 2, 3].map((i) =>
        fetch(`http://127.0.0.1:${base + i}/`).then(
          () => false,
          () => true,
        ),
      ),
    );
    if (free.every(Boolean)) return base;
  }
}

/** One bash script for a session's blocks, with the substitutions the header lists. */
function script(blocks: Block[], dir: string): string {
  const lines = [
    'set -euo pipefail',
    // On a failure, the background processes' logs say why (npm run dev writes dev.log).
    'trap \'rc=$?; if [ $rc -ne 0 ]; then for f in server.log dev.log; do [ -f $f ] && { echo "--- $f, last 30 lines" >&2; tail -n 30 $f >&2; }; done; fi; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true\' EXIT',
    'started() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$IDMINT_PORT/readyz" >/dev/null && return 0; sleep 0.1; done; echo "server did not get ready" >&2; cat server.log >&2; return 1; }',
  ];
  blocks.forEach((block, i) => {
    lines.push(`echo ${q(`### README block ${i + 1} (${block.lang})`)}`);
    if (block.lang === 'ts') {
      writeFileSync(join(dir, `readme-${i + 1}.mts`), block.text);
      lines.push(`node --import tsx readme-${i + 1}.mts`);
      return;
    }
    const source = block.text.split('\n');
    source.forEach((raw, j) => {
      const line = raw.replace(/\s+#.*$/, '').trim();
      if (line === '' || line.startsWith('#')) return;
      const expected = /^# (\{.*\})$/.exec(source[j + 1]?.trim() ?? '')?.[1];
      const command = line.replace(/^npm install && /, '');
      if (/(^|\s)npm start( &)?$/.test(command)) {
        lines.push(`${command.replace(/ &$/, '')} >server.log 2>&1 &`, 'started');
      } else if (expected) {
        lines.push(`out=$(${command})`, `[[ "$out" == ${q(expected)} ]] || { echo "expected: "${q(expected)} >&2; echo "got:      $out" >&2; exit 1; }`);
      } else {
        lines.push(command);
      }
    });
  });
  return lines.join('\n');
}

async function runSession(session: Session, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const dir = cleanCopy();
  dirs.push(dir);
  const port = await fourFreePorts();
  const file = join(dir, `readme-${session}.sh`);
  writeFileSync(
    file,
    script(
      readmeBlocks().filter((b) => b.session === session),
      dir,
    ),
  );
  // The servers the test harness exports are not inherited: each session names its own.
  const base = { ...process.env, KAFKA_BROKERS: '', ZK_CONNECT: '', REDIS_URL: '', DATABASE_URL: '', IDMINT_ADMIN_TOKEN: '' };
  const child = spawn('bash', [file], { cwd: dir, env: { ...base, IDMINT_PORT: String(port), ...env }, detached: true });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // the group is gone already
  }
  return { code, output };
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('README', () => {
  it('marks every sh and ts block as embedded, distributed or skipped with a reason', () => {
    const blocks = readmeBlocks();
    expect(blocks.filter((b) => b.session === 'embedded').length).toBeGreaterThanOrEqual(4);
    expect(blocks.filter((b) => b.session === 'distributed').length).toBeGreaterThanOrEqual(2);
  });

  it('names no fixed port in a block that runs: each follows IDMINT_PORT, as the harness sets it', () => {
    const fixed = readmeBlocks().filter((b) => b.session !== 'skip' && /127\.0\.0\.1:\d/.test(b.text));
    expect(fixed.map((b) => b.text)).toEqual([]);
  });

  it('runs the embedded blocks in order on a clean copy: npm start, curl, the SDK snippet, the CLI', async () => {
    const { code, output } = await runSession('embedded', {});
    expect(output, output).toMatch(/got \d+/);
    expect(code, output).toBe(0);
  });

  it('runs the distributed blocks in order, in one shell, against the local servers: kafka init, npm start, curl, then npm run dev in its place, a tag on one API, IDs from the other and over Kafka', async () => {
    const suffix = Math.random().toString(36).slice(2, 10);
    const { code, output } = await runSession('distributed', {
      IDMINT_INFRA_LIB: join(ROOT, '.infra', 'lib'),
      IDMINT_PG_SCHEMA: `readme_${suffix}`,
      IDMINT_POOL_KEY_PREFIX: `readme-${suffix}:`,
      IDMINT_REFILL_PREFIX: `readme-${suffix}`,
      IDMINT_KAFKA_REQUEST_TOPIC: `readme.requests.${suffix}`,
      IDMINT_KAFKA_RESPONDER_GROUP: `readme.responders.${suffix}`,
    });
    expect(code, output).toBe(0);
    expect(output).toMatch(/"ids":\["\d+","\d+","\d+"\]/);
    expect(output).toMatch(/"bizTag":"invoice"/);
  });
});
