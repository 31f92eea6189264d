import { sleep } from './poll.js';
import type { SpawnedServer } from './spawn.js';

/** The sum over `servers` of a per-tag counter, e.g. `idmint_segment_rewinds_total`. */
export async function tagMetric(servers: readonly SpawnedServer[], bizTag: string, name: string): Promise<number> {
  let total = 0;
  for (const server of servers) {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    total += Number(new RegExp(`${name}\\{biz_tag="${bizTag}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  }
  return total;
}

/**
 * HTTP load on one tag across spawned servers, every ID kept: `loopsPer` loops per server asking
 * for `count` IDs at a time. `servers` is read on every request, so a test may replace a restarted
 * server in it; a server index in `idle` is left alone until removed.
 */
export class IdLoad {
  readonly ids: string[] = [];
  /** `200 <source>` or `<status> <error code>`, counted. */
  readonly statuses = new Map<string, number>();
  readonly idle = new Set<number>();
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(
    private readonly servers: SpawnedServer[],
    private readonly bizTag: string,
    options: { loopsPer?: number; count?: number } = {},
  ) {
    const loopsPer = options.loopsPer ?? 3;
    const count = options.count ?? 20;
    this.loops = servers.flatMap((_, i) => Array.from({ length: loopsPer }, () => this.loop(i, count)));
  }

  allocations(): Promise<number> {
    return tagMetric(this.servers, this.bizTag, 'idmint_segment_allocations_total');
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  describe(): string {
    return JSON.stringify([...this.statuses]);
  }

  private async loop(i: number, count: number): Promise<void> {
    while (this.running) {
      if (this.idle.has(i)) {
        await sleep(20);
        continue;
      }
      const response = await fetch(`${this.servers[i]!.url}/v1/ids/${this.bizTag}?count=${count}`).catch(() => undefined);
      if (!response) {
        await sleep(20); // the process is being restarted
        continue;
      }
      const body = (await response.json()) as { ids?: string[]; source?: string; error?: { code: string } };
      const key = response.status === 200 ? `200 ${body.source}` : `${response.status} ${body.error?.code}`;
      this.statuses.set(key, (this.statuses.get(key) ?? 0) + 1);
      this.ids.push(...(body.ids ?? []));
    }
  }
}
