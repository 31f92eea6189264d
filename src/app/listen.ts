import type { FastifyInstance } from 'fastify';
import { ConfigError, IdmintError } from '../core/errors.js';

/** Listens, turning the usual socket errors into messages that say what to change. Returns the URL. */
export async function listen(app: FastifyInstance, host: string, port: number): Promise<string> {
  try {
    return (await app.listen({ host, port })).replace('[::1]', 'localhost');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new IdmintError('NOT_READY', `port ${port} on ${host} is in use; stop the other process or set IDMINT_PORT`, { cause: err });
    if (code === 'EACCES')
      throw new IdmintError('NOT_READY', `no permission to listen on ${host}:${port}; pick a port above 1024 with IDMINT_PORT`, { cause: err });
    if (code === 'EADDRNOTAVAIL') throw new IdmintError('NOT_READY', `${host} is not an address of this machine; fix IDMINT_HOST`, { cause: err });
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME')
      throw new ConfigError(`IDMINT_HOST ${host} does not resolve to an address; use an IP address or a name this machine resolves`, 'IDMINT_HOST', {
        cause: err,
      });
    throw err;
  }
}
