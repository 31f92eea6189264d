import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A throwaway CA and a server certificate for 127.0.0.1 and localhost in `dir`, as the secured
 * profile of scripts/infra.sh makes them (its make_tls): `ca.pem`, `server.pem`, `server.key`, and
 * `server-bundle.pem` (key and certificate in one file, Kafka's PEM keystore). Returns the CA.
 */
export function makeTls(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=idmint test CA', '-keyout', 'ca.key', '-out', 'ca.pem');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'server.ext',
    '-out',
    'server.pem',
  );
  writeFileSync(join(dir, 'server-bundle.pem'), readFileSync(join(dir, 'server.key'), 'utf8') + readFileSync(join(dir, 'server.pem'), 'utf8'));
  return readFileSync(join(dir, 'ca.pem'), 'utf8');
}
