import cluster, { type Worker } from 'node:cluster';
import { join } from 'node:path';
import { AggregatorRegistry } from 'prom-client';
import type { Logger } from '../../core/logger.js';
import { backoffMs } from '../../core/retry.js';
import type { Config } from '../config.js';
import { CLOSE_DEADLINE_MS } from '../signals.js';
import { advertisedAddress } from '../worker-id.js';
import { METRICS_REPLY, METRICS_REQUEST, type MetricsMessage } from './metrics.js';

/**
 * `idmint serve` with IDMINT_PROCESSES > 1: this primary forks that many serving processes on
 * the one port (node's cluster module hands connections round-robin) and serves nothing itself.
 *
 * Each process is a distinct issuer: its own data directory (`<IDMINT_DATA_DIR>/process-<i>`:
 * worker-id cache, clock mark, lock), its own ZooKeeper or Redis identity (`ip:port#i`; the
 * Postgres provider already keys by pid), its own segments and buffers; all share one config.
 * A process that dies is replaced with the same index, so the same identity and worker id. A
 * first start that fails stops the group (its one-line error is already on stderr): a bad config
 * or an unreachable server, which a restart will not fix. A replacement that dies before it
 * serves is started again after a growing pause (RESTART_BACKOFF_MS), never stopping the others.
 * SIGINT/SIGTERM stop every process gracefully; `/metrics` on any process is the group's sum.
 */
/** The pause before a replacement's next start: doubling from `first` per failed start in a row, up to `max`. */
export const RESTART_BACKOFF_MS = Object.freeze({ first: 200, max: 30_000 });

/** The pause before starting index's replacement after `failedStarts` replacements in a row died before serving. */
export function restartDelay(failedStarts: number): number {
  return backoffMs(failedStarts, { initialMs: RESTART_BACKOFF_MS.first, maxMs: RESTART_BACKOFF_MS.max });
}

export function runPrimary(config: Config, logger: Logger): void {
  const log = logger.child({ component: 'primary' });
  const count = config.IDMINT_PROCESSES;
  const address = advertisedAddress(config);
  const aggregator = new AggregatorRegistry();
  const indexOf = new Map<Worker, number>();
  const listening = new Set<number>();
  /** Indexes that have served once: a later death is a replacement's, restarted with backoff. */
  const served = new Set<number>();
  /** Replacements in a row that died before serving, per index. */
  const failedStarts = new Map<number, number>();
  let stopping = false;

  const fork = (index: number): void => {
    if (stopping) return;
    const worker = cluster.fork({
      IDMINT_PROCESS_INDEX: String(index),
      IDMINT_DATA_DIR: join(config.IDMINT_DATA_DIR, `process-${index}`),
      IDMINT_ADVERTISE: `${address}#${index}`,
    });
    indexOf.set(worker, index);
    worker.on('listening', () => {
      listening.add(index);
      served.add(index);
      failedStarts.delete(index);
      if (listening.size === count) log.info({ processes: count, pid: process.pid }, `all ${count} processes serve on port ${config.IDMINT_PORT}`);
    });
    worker.on('message', (message: MetricsMessage) => {
      if (message?.type !== METRICS_REQUEST) return;
      aggregator.clusterMetrics().then(
        (text) => worker.send({ type: METRICS_REPLY, id: message.id, text, contentType: aggregator.contentType } satisfies MetricsMessage),
        (err: unknown) => worker.send({ type: METRICS_REPLY, id: message.id, error: (err as Error).message } satisfies MetricsMessage),
      );
    });
  };

  let exitCode = 0;
  const stopAll = (signal: NodeJS.Signals, code = 0): void => {
    if (stopping) {
      // A second signal: now.
      for (const worker of indexOf.keys()) worker.process.kill('SIGKILL');
      process.exit(130);
    }
    stopping = true;
    exitCode = code;
    log.info({ signal }, 'stopping every process');
    for (const worker of indexOf.keys()) worker.process.kill('SIGTERM');
    if (indexOf.size === 0) process.exit(exitCode);
    setTimeout(() => {
      log.error(`processes still running after ${CLOSE_DEADLINE_MS + 2000} ms; killing them`);
      for (const worker of indexOf.keys()) worker.process.kill('SIGKILL');
      process.exit(1);
    }, CLOSE_DEADLINE_MS + 2000).unref();
  };

  cluster.on('exit', (worker, code, signal) => {
    const index = indexOf.get(worker) ?? -1;
    indexOf.delete(worker);
    if (stopping) {
      if (indexOf.size === 0) {
        log.info('every process stopped');
        process.exit(exitCode);
      }
      return;
    }
    if (!served.has(index)) {
      // Its first start failed: a bad config or an unreachable server, which a restart will not fix.
      log.error({ index, code, signal }, 'a process failed to start; stopping the group');
      stopAll('SIGTERM', 1);
      return;
    }
    if (listening.delete(index)) {
      log.warn({ index, code, signal }, 'a serving process died; starting its replacement with the same identity');
      setTimeout(() => fork(index), restartDelay(0));
      return;
    }
    // A replacement died while starting (killed, or a server it needs is away for now): the
    // others keep serving, and it is tried again, less often each time.
    const failed = (failedStarts.get(index) ?? 0) + 1;
    failedStarts.set(index, failed);
    const delayMs = restartDelay(failed);
    log.warn({ index, code, signal, failedStarts: failed, delayMs }, 'a replacement died before serving; starting it again after a pause');
    setTimeout(() => fork(index), delayMs);
  });

  process.on('SIGINT', () => stopAll('SIGINT'));
  process.on('SIGTERM', () => stopAll('SIGTERM'));

  log.info({ processes: count }, `starting ${count} serving processes`);
  for (let i = 0; i < count; i++) fork(i);
}
