import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../store/db.js';
import { readRegionFloors, readRegionRecord } from '../store/region-record.js';
import { PostgresSettings } from '../store/settings.js';

/** What `GET /v1/regions` answers: this deployment's region layout, as its database recorded it. */
export interface RegionsReport {
  /** 1: one region (no record). */
  regions: number;
  region?: number;
  stripe?: number;
  recordedAt?: string;
  /** Region 0 of a former single region: the floor of each tag (every other region starts it above). */
  floors: Record<string, string>;
  /** The obfuscation key's recorded fingerprint (a keyed hash, never the key): equal in every region. */
  obfuscationKeyFingerprint?: string;
}

export async function regionsReport(db: Database, fingerprintSetting: string): Promise<RegionsReport> {
  const record = await readRegionRecord(db);
  const floors = await readRegionFloors(db);
  const fingerprint = await new PostgresSettings(db).get(fingerprintSetting);
  return {
    regions: record?.regions ?? 1,
    ...(record ? { region: record.region, stripe: record.stripe, recordedAt: record.recordedAt.toISOString() } : {}),
    floors: Object.fromEntries(floors.map((r) => [r.bizTag, r.floor])),
    ...(fingerprint ? { obfuscationKeyFingerprint: fingerprint } : {}),
  };
}

/** `GET /v1/regions` (admin): what `idmint biz sync` reads from each region before copying tags. */
export function regionsRoute(report: () => Promise<RegionsReport>) {
  return async (app: FastifyInstance, authorize: (request: FastifyRequest) => void): Promise<void> => {
    app.get('/v1/regions', { preHandler: async (request) => authorize(request) }, async () => report());
  };
}
