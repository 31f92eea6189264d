import type { Command } from 'commander';
import { BadRequestError, IdmintError } from '../core/errors.js';
import { call, targetFrom } from './http-client.js';
import { applyLeafImportStep, planLeafImport, readLeafAlloc } from './leaf-import.js';

const say = (line: string): void => void process.stdout.write(`${line}\n`);

/** `idmint import leaf`: continue Meituan Leaf's segment counters in a running idmint. */
export function registerImportCommands(program: Command): void {
  const importCommand = program.command('import').description('continue the counters of another ID generator');
  importCommand
    .command('leaf')
    .description("read Leaf's leaf_alloc and create or advance each tag so its next ID is above Leaf's max_id (a dry run unless --apply)")
    .requiredOption('--mysql <url>', "Leaf's database, e.g. mysql://root@127.0.0.1:3306/leaf")
    .option('--table <name>', 'the allocation table', 'leaf_alloc')
    .option('--margin <n>', 'IDs to skip above each max_id (headroom for a Leaf server still running)', '0')
    .option('--apply', 'make the changes (without it: print the plan and change nothing)')
    .option('--url <url>', 'idmint URL (default $IDMINT_URL or http://127.0.0.1:$IDMINT_PORT)')
    .option('--token <token>', 'admin token (default $IDMINT_ADMIN_TOKEN)')
    .action(async (o: { mysql: string; table: string; margin: string; apply?: boolean; url?: string; token?: string }) => {
      if (!/^\d{1,15}$/.test(o.margin)) throw new BadRequestError(`--margin must be a non-negative integer, got "${o.margin}"`, 'margin');
      const target = targetFrom(o);
      const rows = await readLeafAlloc(o.mysql, o.table);
      const { tags } = await call<{ tags: Array<{ bizTag: string; mode: string }> }>(target, 'GET', '/v1/biz');
      const plan = planLeafImport(rows, new Map(tags.map((t) => [t.bizTag, t])), Number(o.margin));
      let failed = 0;
      for (const [i, step] of plan.entries()) {
        const head = `[${i + 1}/${plan.length}] ${step.row.key}${step.bizTag === step.row.key ? '' : ` -> ${step.bizTag}`}`;
        if (step.action === 'refuse') {
          failed++;
          say(`${head}: skipped: ${step.reason}`);
          continue;
        }
        if (!o.apply) {
          say(`${head}: would ${step.action === 'advance' ? 'advance (unless already above)' : step.action}, next ID > ${step.startAfter}`);
          continue;
        }
        try {
          const done = await applyLeafImportStep(target, step);
          say(`${head}: ${done === 'unchanged' ? `unchanged: its IDs are already above ${step.startAfter}` : `${done}, next ID > ${step.startAfter}`}`);
        } catch (err) {
          failed++;
          say(`${head}: failed: ${(err as Error).message}`);
        }
      }
      say(
        `${plan.length} Leaf tags, ${plan.length - failed} ${o.apply ? 'imported' : 'ready to import'}, ${failed} ${o.apply ? 'skipped or failed' : 'would be skipped'}`,
      );
      if (!o.apply) {
        // A dry run imports nothing, so it does not fail: it says what --apply would do.
        say('dry run: nothing changed. Stop the Leaf servers (or pass --margin), then run again with --apply.');
        return;
      }
      if (failed > 0) throw new IdmintError('BAD_REQUEST', `${failed} Leaf tag(s) were not imported; see the lines above`);
    });
}
