import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectionTls, isSocketUrl } from './postgres-tls.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-pg-tls-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

describe('connectionTls', () => {
  it('verify-full: verifies the chain against the CA file (and the host, Node does), and takes TLS out of the URL', () => {
    const ca = file('ca.pem', 'CA PEM');
    const url = `postgres://sink@db.internal:5432/x?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}&application_name=a`;
    const { url: bare, ssl } = connectionTls(url);
    expect(ssl).toEqual({ rejectUnauthorized: true, ca: 'CA PEM' });
    expect(bare).toBe('postgres://sink@db.internal:5432/x?application_name=a');
  });

  it('reads a client certificate and key; sslrootcert=system keeps the platform CAs', () => {
    const url = `postgres://sink@db/x?sslmode=verify-full&sslrootcert=system&sslcert=${encodeURIComponent(file('c.pem', 'CERT'))}&sslkey=${encodeURIComponent(file('k.pem', 'KEY'))}`;
    expect(connectionTls(url).ssl).toEqual({ rejectUnauthorized: true, cert: 'CERT', key: 'KEY' });
  });

  it('no TLS parameters or sslmode=disable: no TLS, whatever PGSSLMODE says', () => {
    expect(connectionTls('postgres://sink@db/x').ssl).toBe(false);
    expect(connectionTls('postgres://sink@db/x?sslmode=disable')).toEqual({ url: 'postgres://sink@db/x', ssl: false });
  });

  it('refuses what would not verify the server, and names a missing file', () => {
    expect(() => connectionTls('postgres://sink@db/x?sslmode=require')).toThrow(/sslmode=require/);
    expect(() => connectionTls('postgres://sink@db/x?sslmode=verify-ca&sslrootcert=%2Fca')).toThrow(/verify-ca/);
    expect(() => connectionTls('postgres://sink@db/x?sslmode=verify-full&sslrootcert=%2Fnope')).toThrow(
      /cannot read sslrootcert \/nope: ENOENT/,
    );
  });

  it('tells a Unix socket URL from a TCP one', () => {
    expect(isSocketUrl('postgres:///x?host=%2Fvar%2Frun%2Fpostgresql')).toBe(true);
    expect(isSocketUrl('postgres://sink@%2Fvar%2Frun%2Fpostgresql/x')).toBe(true);
    expect(isSocketUrl('postgres://sink@db:5432/x')).toBe(false);
    expect(isSocketUrl('postgres://sink@127.0.0.1/x?host=db.internal')).toBe(false);
  });
});
