import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { browserAdminHook } from '../http/auth.js';
import { defaults, OptionsError, resolveOptions } from '../core/options.js';

export interface BullBoardOptions {
  /** The queues shown: at least the refill queue (`RefillQueue.queue`). */
  queues: Queue[];
  /** Throws UNAUTHORIZED for a request without the admin token (src/http/auth.ts `makeAdminGuard`). */
  authorize: (request: FastifyRequest) => void;
  /** Where the board is served. Default `/ui`. */
  basePath?: string;
  /** Hide retry/clean/remove buttons. Default false: operators retry failed refills from here. */
  readOnly?: boolean;
  /** Board title. Default `idmint refills`. */
  title?: string;
}

/** bull-board's stylesheet link to Google Fonts (its only asset from outside the server). */
const EXTERNAL_FONTS = /<link[^>]*fonts\.googleapis\.com[^>]*>/g;

export const BULL_BOARD_DEFAULTS = defaults({ basePath: '/ui', readOnly: false, title: 'idmint refills' });

/**
 * bull-board over the refill queue at `/ui`: waiting, delayed (retries with backoff), failed
 * and completed refills, and the repeatable sweep. Every route, static assets included, needs
 * the admin token as a Bearer header or as the basic-auth password (browsers prompt for it).
 */
export async function registerBullBoard(app: FastifyInstance, options: BullBoardOptions): Promise<void> {
  const {
    basePath,
    readOnly: readOnlyMode,
    title,
    queues,
    authorize,
  } = resolveOptions(BULL_BOARD_DEFAULTS, options, (s) => {
    if (!/^\/[A-Za-z0-9/_-]*$/.test(s.basePath) || (s.basePath.length > 1 && s.basePath.endsWith('/'))) {
      throw new OptionsError('dashboard', 'basePath', `must look like /ui, got "${s.basePath}"`);
    }
    if (s.queues.length === 0) throw new OptionsError('dashboard', 'queues', 'needs at least one queue (the refill queue)');
  });
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(basePath);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode })),
    serverAdapter,
    options: { uiConfig: { boardTitle: title } },
  });

  await app.register(async (scope) => {
    scope.addHook('onRequest', browserAdminHook(authorize));
    // Every asset from this server: bull-board's page links IBM Plex from Google Fonts, which an
    // offline or locked-down network cannot reach (and which tells Google who opens the board).
    // Without the link the board falls back to its system font stack.
    scope.addHook('onSend', async (_request, reply, payload) =>
      typeof payload === 'string' && String(reply.getHeader('content-type') ?? '').startsWith('text/html') ? payload.replace(EXTERNAL_FONTS, '') : payload,
    );
    await scope.register(serverAdapter.registerPlugin(), { prefix: basePath });
  });
}

/** The same, in the shape `buildHttpServer({ extensions })` takes. */
export function bullBoardExtension(options: Omit<BullBoardOptions, 'authorize'>) {
  return (app: FastifyInstance, authorize: (request: FastifyRequest) => void) => registerBullBoard(app, { ...options, authorize });
}
