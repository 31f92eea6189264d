import { randomBytes } from 'node:crypto';

/** Tests are isolated by unique names (tags, key prefixes, schemas, topics, groups), never by flushing shared servers. */
export function uniqueName(prefix: string, separator = '-'): string {
  return `${prefix}${separator}${randomBytes(5).toString('hex')}`;
}

/** A short random suffix. */
export function uid(): string {
  return randomBytes(4).toString('hex');
}
