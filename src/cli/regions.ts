import type { Command } from 'commander';
import { IdmintError } from '../core/errors.js';
import { DEFAULT_STRIPE, regionLayout } from '../core/region.js';
import type { RegionsPlan } from '../regions/apply.js';
import type { RegionsReport } from '../regions/report.js';
import { checkRegionPair, planSync, type TagDef } from '../regions/sync.js';
import { call, targetFrom } from './http-client.js';
import { openDatabase } from './open-db.js';
import type { Database } from '../store/db.js';

const say = (line: string): void => void process.stdout.write(`${line}\n`);

interface RegionsFlags {
  regions: string;
  stripe: string;
  from: string;
  to: string[];
  schema?: string;
}

function printPlan(plan: RegionsPlan): void {
  say(
    `region 0 (--from): ${plan.source.record === 'record' ? 'becomes region 0' : 'is region 0 already'} of ${plan.regions}, stripes of ${plan.stripe} IDs; ${plan.source.tags} tag(s); floors ${plan.source.floors === 'taken' ? 'taken by an earlier run' : "taken at apply (each tag's counter then)"}`,
  );
  for (const step of plan.targets) {
    say(
      `region ${step.region}: ${step.record === 'refuse' ? `REFUSED: ${step.reason}` : step.record === 'record' ? 'becomes region ' + step.region : 'is region ' + step.region + ' already'}`,
    );
    for (const tag of step.tags) {
      const what = { create: 'create', raise: 'raise its counters', unchanged: 'unchanged', refuse: `REFUSED: ${tag.reason}` }[tag.action];
      say(`  ${tag.bizTag}: ${what}${tag.floor > 0 && tag.action !== 'refuse' ? `, next ID above ${tag.floor}` : ''}`);
    }
  }
}

/** Each region's database by its URL, in `--schema` or else IDMINT_PG_SCHEMA, through the CLI's one open helper. */
const open = (url: string, schema: string | undefined): Promise<Database> => openDatabase({ url, schema }, "a region's tags and layout live");

/** `idmint biz sync`: this region's tags made the same as another region's (src/regions/sync.ts). */
function registerBizSync(program: Command): void {
  const biz = program.commands.find((c) => c.name() === 'biz');
  if (!biz) throw new Error('registerRegionsCommands runs after the biz commands are registered');
  biz
    .command('sync')
    .description(
      "make this region's tags the same as another region's: create the missing ones (above region 0's floors), follow step, limits, fallback, pool, description; refuse a tag whose mode, format or shards differ",
    )
    .requiredOption('--from <url>', 'an API server of the region to copy from')
    .option('--from-token <token>', 'its admin token (default --token)')
    .option('--url <url>', 'an API server of this region (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('--token <token>', 'admin token (default $IDMINT_ADMIN_TOKEN)')
    .option('--dry-run', 'say what would change, change nothing')
    .action(async (o: { from: string; fromToken?: string; url?: string; token?: string; dryRun?: boolean }) => {
      const here = targetFrom(o);
      const there = targetFrom({ url: o.from, ...((o.fromToken ?? o.token) ? { token: o.fromToken ?? o.token } : {}) });
      const [fromReport, hereReport] = await Promise.all([call<RegionsReport>(there, 'GET', '/v1/regions'), call<RegionsReport>(here, 'GET', '/v1/regions')]);
      checkRegionPair(fromReport, hereReport, { from: there.url, here: here.url });
      const [source, mine] = await Promise.all([call<{ tags: TagDef[] }>(there, 'GET', '/v1/biz'), call<{ tags: TagDef[] }>(here, 'GET', '/v1/biz')]);
      const steps = planSync(source.tags, mine.tags, fromReport, hereReport);
      let conflicts = 0;
      for (const [i, step] of steps.entries()) {
        const head = `[${i + 1}/${steps.length}] ${step.bizTag}`;
        if (step.action === 'conflict') {
          conflicts++;
          say(`${head}: CONFLICT: ${step.reason}`);
        } else if (step.action === 'unchanged') say(`${head}: unchanged`);
        else if (o.dryRun) say(`${head}: would ${step.action === 'create' ? 'create' : `update (${step.changes.join(', ') || 'counters up to the floor'})`}`);
        else if (step.action === 'create') {
          await call(here, 'POST', '/v1/biz', step.body);
          say(`${head}: created${step.body.startAfter ? `, next ID above ${String(step.body.startAfter)}` : ''}`);
        } else {
          const done = await call<{ countersRaised?: boolean }>(here, 'PATCH', `/v1/biz/${encodeURIComponent(step.bizTag)}`, step.patch);
          const raised = done?.countersRaised
            ? ["counters raised to region 0's floor (IDs this region gave below it before may repeat region 0's: check the ledger)"]
            : [];
          say(`${head}: ${step.changes.length + raised.length === 0 ? 'unchanged' : `updated: ${[...step.changes, ...raised].join(', ')}`}`);
        }
      }
      say(
        `${steps.length} tag(s) of region ${String(fromReport.region)} checked against region ${String(hereReport.region)}: ${conflicts} conflict(s)${o.dryRun ? ' (dry run: nothing changed)' : ''}`,
      );
      if (conflicts > 0) throw new IdmintError('BAD_REQUEST', `${conflicts} tag(s) differ in what is fixed at creation; see the lines above`);
    });
}

/** `idmint regions plan|apply`: one region becomes several (src/regions/apply.ts says why no ID repeats). */
export function registerRegionsCommands(program: Command): void {
  registerBizSync(program);
  const regions = program.command('regions').description('turn a deployment that served alone into region 0 of several');
  for (const name of ['plan', 'apply'] as const) {
    regions
      .command(name)
      .description(
        name === 'plan'
          ? 'say what apply would do: which tags each new region creates or raises, and above which ID; changes nothing'
          : "record region 0 in --from, take each tag's floor, and start every tag of each --to region above it (idempotent)",
      )
      .requiredOption('--regions <n>', 'how many regions the ID space is split for (2 to 64), for the life of the data')
      .option('--stripe <ids>', "IDs per stripe of a segment tag's number line", String(DEFAULT_STRIPE))
      .requiredOption('--from <url>', 'the database of the deployment that served alone (it becomes region 0)')
      .requiredOption('--to <url...>', 'the databases of regions 1, 2, … in order (fresh, or applied before)')
      .option('--schema <name>', "Postgres schema of idmint's tables in every database (default $IDMINT_PG_SCHEMA)")
      .action(async (o: RegionsFlags) => {
        if (!/^\d{1,2}$/.test(o.regions) || !/^\d{1,15}$/.test(o.stripe))
          throw new IdmintError('BAD_REQUEST', `--regions and --stripe take whole numbers, got "${o.regions}" and "${o.stripe}"`);
        const layout = regionLayout(Number(o.regions), 0, Number(o.stripe));
        const { applyRegions, planRegions } = await import('../regions/apply.js');
        const dbs: Database[] = [];
        try {
          const source = await open(o.from, o.schema);
          dbs.push(source);
          for (const url of o.to) dbs.push(await open(url, o.schema));
          const targets = dbs.slice(1);
          if (name === 'plan') {
            const plan = await planRegions(source, targets, layout);
            printPlan(plan);
            say(
              plan.ok
                ? "plan: nothing changed. Run `idmint regions apply` with the same flags, then restart region 0's processes with IDMINT_REGIONS and IDMINT_REGION=0."
                : 'plan: refusals above; apply would change nothing.',
            );
            if (!plan.ok) throw new IdmintError('BAD_REQUEST', 'the plan has refusals; see the lines above');
            return;
          }
          const plan = await applyRegions(source, targets, layout, say);
          say(
            `applied: ${plan.targets.length + 1} region(s) of ${plan.regions}. Restart region 0's processes with IDMINT_REGIONS=${plan.regions} IDMINT_REGION=0${plan.stripe === DEFAULT_STRIPE ? '' : ` IDMINT_REGION_STRIPE=${plan.stripe}`}, then start the others with their IDMINT_REGION.`,
          );
        } finally {
          for (const db of dbs) await db.close();
        }
      });
  }
}
