/**
 * `npm run chaos [-- --minutes N] [--seed S] [--out DIR] [--topology single|ha]`: the whole
 * topology as processes on private servers, load through every path at once, faults on a seeded
 * schedule (every kind at least once, then seeded picks until N minutes have passed), then a
 * report with a chart and `duplicates: 0` — or the list and exit 1. `--topology ha` replicates
 * every server (three Kafka brokers, a ZooKeeper ensemble, Redis under Sentinel, Postgres under
 * Patroni) and puts their failovers in place of the single servers' restarts: a Kafka leader
 * killed, a broker hung, the ZooKeeper leader killed, the Redis master hung until a replica is
 * promoted, Patroni failovers (one that loses the last commits). `--regions N` runs N regions
 * (IDMINT_REGIONS) side by side on the same servers, each its own schema, key prefix, queue and
 * request topic and its six roles, every path loaded in each into one ledger (a repeat across
 * regions is a duplicate like any other); each fault hits a region picked by the seed, and a
 * whole region SIGKILLed and restarted is one more fault kind.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKafka } from '../src/kafka/kafkajs/client.js';
import { chartSvg } from './chart.js';
import { faultsFor, REGION_KILL, schedule, seeded } from './faults.js';
import { Ledger } from './ledger.js';
import { Load, TAGS } from './load.js';
import { reportMarkdown, type ChaosSummary, type FaultRecord } from './report.js';
import { Topology, type TopologyKind } from './topology.js';

export interface ChaosOptions {
  minutes: number;
  seed: number;
  outDir: string;
  /** Seconds between faults. Default 3 for runs under 5 minutes, else a seeded 5–20. */
  gapSeconds?: number;
  log?: (line: string) => void;
  command?: string;
  /** `ha`: Postgres under Patroni, with failovers among the faults. Default `single`. */
  topology?: TopologyKind;
  /** Regions side by side (IDMINT_REGIONS). Default 1: no region settings, today's topology. */
  regions?: number;
}

/** Region r's own variables; region 0 keeps idmint's default schema, prefixes and topic names. */
function regionEnv(regions: number, region: number): Record<string, string> {
  if (regions === 1) return {};
  const own: Record<string, string> =
    region === 0
      ? {}
      : {
          IDMINT_PG_SCHEMA: `region${region}`,
          IDMINT_POOL_KEY_PREFIX: `r${region}:`,
          IDMINT_REFILL_QUEUE: `refill-r${region}`,
          IDMINT_KAFKA_NAMESPACE: `r${region}`,
        };
  return { IDMINT_REGIONS: String(regions), IDMINT_REGION: String(region), ...own };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosSummary> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[chaos] ${line}\n`));
  const rng = seeded(options.seed);
  const kind = options.topology ?? 'single';
  const regions = options.regions ?? 1;
  const kinds = regions > 1 ? [...faultsFor(kind), REGION_KILL] : faultsFor(kind);
  const next = schedule(rng, kinds);
  const topology = await Topology.start(log, kind, regionEnv(regions, 0));
  const topologies = [topology];
  const faults: FaultRecord[] = [];
  let ledger: Ledger | undefined;
  let loads: Load[] = [];
  const kafka = createKafka({ brokers: topology.env.KAFKA_BROKERS!, clientId: 'idmint-chaos' });
  try {
    for (let r = 1; r < regions; r++) topologies.push(await Topology.beside(topology, log, regionEnv(regions, r)));
    for (const t of topologies) {
      const [api] = t.apiUrls();
      for (const tag of TAGS) {
        const response = await fetch(`${api}/v1/biz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(tag) });
        if (response.status !== 201) throw new Error(`creating ${tag.bizTag}: ${response.status} ${await response.text()}`);
      }
    }
    await sleep(1500); // every process sees new tags within a second
    const shared = new Ledger();
    ledger = shared;
    loads = topologies.map((t) => new Load(shared, t.apiUrls(), kafka, t.env.IDMINT_KAFKA_NAMESPACE));
    const paths = (await Promise.all(loads.map((l) => l.start())))[0]!;
    log(`load running on ${paths.length} paths`);
    await sleep(5000);
    const deadline = ledger.startedAt + options.minutes * 60_000;
    const long = options.minutes >= 5;
    while (faults.length < kinds.length || Date.now() < deadline) {
      const fault = next();
      ledger.newPhase();
      ledger.faultStarted();
      const startedAt = Date.now();
      let result = 'recovered';
      // One region's roles take the fault (the servers are everyone's); one region: no pick, the same schedule as before.
      const region = topologies.length === 1 ? undefined : Math.floor(rng() * topologies.length);
      const target = topologies[region ?? 0]!;
      try {
        await Promise.race([fault.inject(target, rng), sleep(240_000).then(() => Promise.reject(new Error('did not recover within 240 s')))]);
      } catch (err) {
        result = `FAILED: ${(err as Error).message.split('\n')[0]}`;
      }
      ledger.faultEnded();
      faults.push({
        kind: fault.kind,
        what: fault.what,
        startSecond: Math.round((startedAt - ledger.startedAt) / 1000),
        seconds: (Date.now() - startedAt) / 1000,
        result,
        ...(region === undefined ? {} : { region }),
      });
      log(`fault ${faults.length}: ${fault.kind} — ${result} in ${((Date.now() - startedAt) / 1000).toFixed(1)} s; ${ledger.total} IDs so far`);
      if (result !== 'recovered') break;
      await sleep(1000 * (options.gapSeconds ?? (long ? 5 + Math.floor(rng() * 16) : 3)));
    }
    ledger.newPhase();
    await sleep(10_000); // service after the last fault
    await Promise.all(loads.map((l) => l.stop()));
    loads = [];
    const seconds = (Date.now() - ledger.startedAt) / 1000;
    log(`checking ${ledger.total} IDs for duplicates`);
    const summary: ChaosSummary = { seed: options.seed, topology: kind, regions, seconds, total: ledger.total, faults, duplicates: ledger.duplicates(), paths };
    mkdirSync(options.outDir, { recursive: true });
    const command =
      options.command ??
      `npm run chaos -- --minutes ${options.minutes} --seed ${options.seed}${kind === 'ha' ? ' --topology ha' : ''}${regions > 1 ? ` --regions ${regions}` : ''}`;
    writeFileSync(join(options.outDir, 'report.md'), reportMarkdown(summary, ledger, command));
    writeFileSync(
      join(options.outDir, 'chart.svg'),
      chartSvg(
        ledger.timeline,
        faults.map((f) => ({ atSecond: f.startSecond, label: f.kind })),
        `idmint chaos run, seed ${options.seed}: IDs/s per path, faults in red`,
      ),
    );
    writeFileSync(join(options.outDir, 'summary.json'), JSON.stringify({ ...summary, errors: Object.fromEntries(ledger.errors) }, null, 2));
    log(`report: ${join(options.outDir, 'report.md')}; duplicates: ${summary.duplicates.length}`);
    return summary;
  } finally {
    await Promise.all(loads.map((l) => l.stop().catch(() => undefined)));
    for (const t of topologies.slice(1)) await t.close();
    await topology.close();
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback: string): string => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
  };
  const minutes = Number(flag('minutes', '2'));
  const seed = Number(flag('seed', String(Date.now() % 100_000)));
  const topology = flag('topology', 'single');
  const regions = Number(flag('regions', '1'));
  if (!(minutes > 0) || !Number.isInteger(seed) || (topology !== 'single' && topology !== 'ha') || !Number.isInteger(regions) || regions < 1 || regions > 4) {
    process.stderr.write(
      'usage: npm run chaos -- [--minutes N] [--seed S] [--out DIR] [--topology single|ha] [--regions R]  (N > 0 minutes, S an integer, R from 1 to 4)\n',
    );
    process.exit(2);
  }
  const outDir = resolve(flag('out', `chaos-report/${topology === 'ha' ? 'ha-' : ''}${regions > 1 ? `regions-${regions}-` : ''}seed-${seed}`));
  const summary = await runChaos({ minutes, seed, outDir, topology, regions });
  process.stdout.write(`duplicates: ${summary.duplicates.length} in ${summary.total} IDs, ${summary.faults.length} faults; report in ${outDir}\n`);
  process.exit(summary.duplicates.length === 0 && summary.faults.every((f) => f.result === 'recovered') ? 0 : 1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  main().catch((err: unknown) => {
    process.stderr.write(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
