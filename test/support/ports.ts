import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Below the kernel's ephemeral range (the source ports of outgoing connections), and above the infra's fixed ports (1xxxx). */
const FLOOR = 20_000;
/** scripts/infra-ha.sh's fixed ports (IDMINT_INFRA_HA_PORT, default 29000, and the next hundred or so). */
const HA_PORTS = { from: 29_000, to: 29_199 };

/** The first port the kernel hands to outgoing connections (Linux: 32768 unless configured). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > FLOOR + 1000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function listensOn(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A loopback port free right now; also "a server that is down" when nobody starts one there.
 * Picked below the ephemeral range: a port the OS picks (listen on 0) is one it also gives to
 * outgoing connections, and a CI run lost a spawned server to one (`port 43893 … is in use`)
 * between this check and the server's listen.
 */
export async function freePort(): Promise<number> {
  const span = ephemeralLow() - FLOOR;
  for (let i = 0; i < 50; i++) {
    const pick = FLOOR + Math.floor(Math.random() * span);
    if (pick >= HA_PORTS.from && pick <= HA_PORTS.to) continue;
    const port = await listensOn(pick);
    if (port !== undefined) return port;
  }
  const any = await listensOn(0);
  if (any === undefined) throw new Error('no free loopback port');
  return any;
}
