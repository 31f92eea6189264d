import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/app/config.js';
import { redactUrl } from '../../../src/core/redact.js';
import { splitPostgresUrl } from '../../../src/store/pg-hosts.js';

describe('multi-host DATABASE_URL (libpq syntax)', () => {
  it('splits hosts into one URL each, keeps the credentials and parameters, and asks for the writable primary', () => {
    const hosts = splitPostgresUrl('postgres://idmint:s3cret@db1:5432,db2:5433,db3/idmint?sslmode=require&target_session_attrs=read-write');
    expect(hosts.names).toEqual(['db1:5432', 'db2:5433', 'db3']);
    expect(hosts.urls).toEqual([
      'postgres://idmint:s3cret@db1:5432/idmint?sslmode=require',
      'postgres://idmint:s3cret@db2:5433/idmint?sslmode=require',
      'postgres://idmint:s3cret@db3/idmint?sslmode=require',
    ]);
    expect(hosts.targetSessionAttrs).toBe('read-write');
  });

  it('a single host is itself, taken as it is; several default to read-write', () => {
    expect(splitPostgresUrl('postgres://u@h:5432/db')).toEqual({ urls: ['postgres://u@h:5432/db'], names: ['h:5432'], targetSessionAttrs: 'any' });
    expect(splitPostgresUrl('postgresql://h1,h2/db').targetSessionAttrs).toBe('read-write');
    expect(splitPostgresUrl('postgres://h1,h2/db?target_session_attrs=any').targetSessionAttrs).toBe('any');
  });

  it('refuses what libpq would: an empty host, an unknown target_session_attrs, a bad port', () => {
    expect(() => splitPostgresUrl('postgres://h1,,h2/db')).toThrow(/empty host/);
    expect(() => splitPostgresUrl('postgres://h1/db?target_session_attrs=standby')).toThrow(/target_session_attrs must be one of any, read-write, primary/);
    expect(() => splitPostgresUrl('postgres://h1:99999,h2/db')).toThrow(/h1:99999/);
    expect(() => splitPostgresUrl('mysql://h1/db')).toThrow(/postgres:\/\//);
    expect(() => splitPostgresUrl('mysql://h1/db')).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field: 'DATABASE_URL' }));
  });

  it('config accepts it, and a redacted one hides the password', () => {
    const url = 'postgres://idmint:s3cret@db1:5432,db2:5432/idmint';
    expect(loadConfig({ DATABASE_URL: url }).DATABASE_URL).toBe(url);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://h1,,h2/db' })).toThrow(/DATABASE_URL/);
    expect(redactUrl(url)).toBe('postgres://idmint:***@db1:5432,db2:5432/idmint');
  });
});
