import type { Command } from 'commander';
import { BadRequestError, IdmintError } from '../core/errors.js';
import { call, targetFrom } from './http-client.js';
import { retry } from '../core/retry.js';
import { hasCounter, MAX_SHARDS } from '../core/ports.js';
import type { RegionsReport } from '../regions/report.js';
import { checkKeyAcrossRegions, checkRegionPair } from '../regions/sync.js';

const print = (value: unknown): void => void process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);

function positiveInt(name: string, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
      throw new BadRequestError(`${name} must be an integer from 1 to ${max}, got "${raw}"`, name);
    return Number(raw);
  };
}

// commander turns a parser's null into '', so "no limit" travels as a marker until the body is built.
const NO_LIMIT = 'none';

function nullableLimit(raw: string): number | typeof NO_LIMIT {
  if (raw === 'none' || raw === 'null') return NO_LIMIT;
  return positiveInt('--max-limit')(raw);
}

interface TargetFlags {
  url?: string;
  token?: string;
}

function withTarget(command: Command): Command {
  return command
    .option('--url <url>', 'server URL (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('--token <token>', 'admin token (default $IDMINT_ADMIN_TOKEN)');
}

/** `--regions URL,URL`: the same change on an API server of each region (one admin token for all), else --url. */
function withRegions(command: Command): Command {
  return command.option('--regions <urls>', 'make the change on an API server of each region, comma-separated URLs (in place of --url)');
}

async function eachRegion(o: TargetFlags & { regions?: unknown }, change: (target: ReturnType<typeof targetFrom>) => Promise<unknown>): Promise<void> {
  if (typeof o.regions !== 'string') return print(await change(targetFrom(o)));
  const urls = o.regions
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length === 0) throw new BadRequestError('--regions needs at least one URL', 'regions');
  for (const url of urls) {
    const result = await change(targetFrom({ ...o, url }));
    print(`${url}: ${result === undefined ? 'done' : JSON.stringify(result)}`);
  }
}

/** `idmint biz ...`, `idmint get`, `idmint decode`: thin clients of a running server's HTTP API. */
export function registerClientCommands(program: Command): void {
  const biz = program.command('biz').description('create, list, update and delete business tags on a running server');

  // What either command changes; --mode and --format are fixed at creation (a tag's IDs must stay decodable).
  const tagFlags = (command: Command): Command =>
    command
      .option('--step <n>', 'segment size', positiveInt('--step'))
      .option('--max-limit <n|none>', 'largest ID ever issued, or none', nullableLimit)
      .option('--shards <n>', 'shards (sharded mode)', positiveInt('--shards', MAX_SHARDS))
      .option('--fallback <policy>', 'segment | snowflake | error')
      .option('--pool <kind>', 'auto | memory | redis-list | redis-counter | kafka')
      .option('--description <text>', 'free text')
      .option('--start-after <n>', "raise the tag's counters: every ID from now on is above n (never lowers them)", positiveInt('--start-after'));
  const createFlags = (command: Command): Command =>
    tagFlags(command)
      .option('--mode <mode>', 'segment | snowflake | uid | sharded')
      .option('--format <format>', 'decimal | obfuscated | base62 | sqids | obfuscated+base62 | obfuscated+sqids');

  const pickTagFields = (o: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(o)
        .filter(([k, v]) => v !== undefined && !['url', 'token', 'regions'].includes(k))
        .map(([k, v]) => [k, k === 'maxLimit' && v === NO_LIMIT ? null : v]),
    );

  withRegions(withTarget(createFlags(biz.command('create <bizTag>').description('create a tag')))).action(
    async (bizTag: string, o: TargetFlags & Record<string, unknown>) => {
      const body: Record<string, unknown> = { bizTag, ...pickTagFields(o) };
      if (typeof o.regions === 'string') {
        // Every region a region of one split, each its own number; a tag region 0 had before the split starts above its floor everywhere.
        const reports = await Promise.all(
          o.regions
            .split(',')
            .map((url) => url.trim())
            .filter(Boolean)
            .map(async (url) => ({ url, report: await call<RegionsReport>(targetFrom({ ...o, url }), 'GET', '/v1/regions') })),
        );
        for (const [i, a] of reports.entries()) for (const b of reports.slice(i + 1)) checkRegionPair(a.report, b.report, { from: a.url, here: b.url });
        checkKeyAcrossRegions(String(body.format ?? 'decimal'), reports);
        const floor = Math.max(0, ...reports.map((r) => Number(r.report.floors[bizTag] ?? 0)));
        if (floor > 0 && (body.mode === undefined || hasCounter(String(body.mode)))) body.startAfter = Math.max(Number(body.startAfter ?? 0), floor);
      }
      await eachRegion(o, (target) => call(target, 'POST', '/v1/biz', body));
    },
  );
  withTarget(biz.command('list').description('list tags')).action(async (o: TargetFlags) => {
    const { tags } = await call<{ tags: Array<Record<string, unknown>> }>(targetFrom(o), 'GET', '/v1/biz');
    if (tags.length === 0) return print('no tags yet: create one with `idmint biz create <bizTag>`');
    for (const t of tags) print(`${String(t.bizTag).padEnd(24)} ${String(t.mode).padEnd(10)} step=${t.step} fallback=${t.fallback} pool=${t.pool}`);
  });
  withRegions(withTarget(tagFlags(biz.command('update <bizTag>').description('change a tag')))).action(
    async (bizTag: string, o: TargetFlags & Record<string, unknown>) => {
      const patch = pickTagFields(o);
      if (Object.keys(patch).length === 0)
        throw new BadRequestError('nothing to change: pass at least one of --step, --max-limit, --shards, --fallback, --pool, --description, --start-after');
      await eachRegion(o, (target) => call(target, 'PATCH', `/v1/biz/${encodeURIComponent(bizTag)}`, patch));
    },
  );
  withTarget(biz.command('delete <bizTag>').description('delete a tag (its counter is kept, so IDs never repeat)')).action(
    async (bizTag: string, o: TargetFlags) => {
      await call(targetFrom(o), 'DELETE', `/v1/biz/${encodeURIComponent(bizTag)}`);
      print(`deleted ${bizTag}`);
    },
  );

  const token = biz.command('token').description("a tag's access tokens: a tag with tokens hands out IDs only to callers presenting one");
  withTarget(token.command('create <bizTag>').description('create a token (shown once: store it where the caller reads it)')).action(
    async (bizTag: string, o: TargetFlags) => {
      const created = await call<{ id: string; token: string }>(targetFrom(o), 'POST', `/v1/biz/${encodeURIComponent(bizTag)}/tokens`);
      print(created);
      process.stderr.write(`callers now need it: idmint get ${bizTag} --token <token>, IDMINT_TAG_TOKEN, or createIdmintClient({ url, token })\n`);
    },
  );
  withTarget(token.command('list <bizTag>').description("list a tag's tokens by prefix (never the tokens themselves)")).action(
    async (bizTag: string, o: TargetFlags) => {
      const { tokens } = await call<{ tokens: Array<{ id: string; prefix: string; createdAt: string; revokedAt?: string }> }>(
        targetFrom(o),
        'GET',
        `/v1/biz/${encodeURIComponent(bizTag)}/tokens`,
      );
      if (tokens.length === 0) return print(`${bizTag} has no tokens: it is open to every caller`);
      for (const t of tokens) print(`${t.id.padEnd(6)} ${t.prefix}…  created ${t.createdAt}${t.revokedAt ? `  revoked ${t.revokedAt}` : ''}`);
      if (tokens.every((t) => t.revokedAt))
        print(`every token is revoked: ${bizTag} is closed to every caller until you create one, or open it with \`idmint biz token open ${bizTag}\``);
    },
  );
  withTarget(
    token.command('revoke <bizTag> <id>').description('revoke a token (the tag stays closed to callers without a live one, even when none is left)'),
  ).action(async (bizTag: string, id: string, o: TargetFlags) => {
    await call(targetFrom(o), 'DELETE', `/v1/biz/${encodeURIComponent(bizTag)}/tokens/${encodeURIComponent(id)}`);
    print(`revoked token ${id} of ${bizTag}`);
  });
  withTarget(token.command('open <bizTag>').description('remove every token of a tag, live and revoked: it hands out IDs to every caller again')).action(
    async (bizTag: string, o: TargetFlags) => {
      const { removed } = await call<{ removed: number }>(targetFrom(o), 'DELETE', `/v1/biz/${encodeURIComponent(bizTag)}/tokens`);
      print(`${bizTag} is open to every caller (${removed} token${removed === 1 ? '' : 's'} removed)`);
    },
  );

  program
    .command('get <bizTag>')
    .description('fetch IDs from a running server')
    .option('--url <url>', 'server URL (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('-n, --count <n>', 'how many (the server allows up to IDMINT_MAX_COUNT, 10000 by default)', positiveInt('--count'), 1)
    .option('--token <token>', "the tag's token, when it has tokens (default $IDMINT_TAG_TOKEN)")
    .option('--gate-pass <pass>', "the server's gate pass (default $IDMINT_GATE_PASS)")
    .option('--json', 'print the whole JSON answer')
    .action(async (bizTag: string, o: { url?: string; token?: string; count: number; json?: boolean; gatePass?: string }) => {
      const gatePass = o.gatePass ?? process.env.IDMINT_GATE_PASS;
      const tagToken = o.token ?? process.env.IDMINT_TAG_TOKEN;
      const query = `count=${o.count}${gatePass ? `&gatePass=${encodeURIComponent(gatePass)}` : ''}`;
      const target = { ...targetFrom({ ...(o.url ? { url: o.url } : {}) }), ...(tagToken ? { tagToken } : {}) };
      const result = await call<{ ids: string[]; source: string }>(target, 'GET', `/v1/ids/${encodeURIComponent(bizTag)}?${query}`);
      print(o.json ? result : result.ids.join('\n'));
    });

  program
    .command('wait')
    .description('wait until a server answers /readyz (ready or degraded), for scripts that start one')
    .option('--url <url>', 'server URL (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('--timeout <ms>', 'give up after this long', positiveInt('--timeout'), 60_000)
    .action(async (o: TargetFlags & { timeout: number }) => {
      const target = targetFrom(o);
      const report = await retry(() => call<{ status: string }>(target, 'GET', '/readyz'), {
        what: `waiting for ${target.url}`,
        retriable: () => true,
        timeoutMs: o.timeout,
        initialMs: 200,
        factor: 1,
        maxMs: 200,
      }).catch((err: unknown) => {
        throw new IdmintError('TIMEOUT', `${target.url} was not ready within ${o.timeout} ms: ${(err as Error).message}`, { cause: err });
      });
      print(`${target.url} is ${report.status}`);
    });

  program
    .command('decode <id>')
    .description("decode an ID's fields (time, worker, sequence) on a running server")
    .option('--url <url>', 'server URL (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('--biz-tag <bizTag>', "decode by this tag's layout")
    .option('--token <token>', "the tag's token, when it has tokens (default $IDMINT_TAG_TOKEN)")
    .action(async (id: string, o: { url?: string; token?: string; bizTag?: string }) => {
      const query = o.bizTag ? `?bizTag=${encodeURIComponent(o.bizTag)}` : '';
      const tagToken = o.token ?? process.env.IDMINT_TAG_TOKEN;
      const target = { ...targetFrom({ ...(o.url ? { url: o.url } : {}) }), ...(tagToken ? { tagToken } : {}) };
      print(await call(target, 'GET', `/v1/decode/${encodeURIComponent(id)}${query}`));
    });
}
