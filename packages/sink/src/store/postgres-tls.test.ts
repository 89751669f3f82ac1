import { describe, expect, it } from 'vitest';
import { connectionTls, isSocketUrl, NO_FILES } from './postgres-tls.js';

// The files main.ts would read, by path (connectionTls reads through the reader it is given).
const files = new Map<string, string>();
const file = (name: string, text: string) => {
  files.set(`/etc/pg/${name}`, text);
  return `/etc/pg/${name}`;
};
const readFile = (path: string): string => {
  const text = files.get(path);
  if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
  return text;
};

describe('connectionTls', () => {
  it('verify-full: verifies the chain against the CA file (and the host, Node does), and takes TLS out of the URL', () => {
    const ca = file('ca.pem', 'CA PEM');
    const url = `postgres://sink@db.internal:5432/x?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}&application_name=a`;
    const { url: bare, ssl } = connectionTls(url, readFile);
    expect(ssl).toEqual({ rejectUnauthorized: true, ca: 'CA PEM' });
    expect(bare).toBe('postgres://sink@db.internal:5432/x?application_name=a');
  });

  it('reads a client certificate and key; sslrootcert=system keeps the platform CAs', () => {
    const url = `postgres://sink@db/x?sslmode=verify-full&sslrootcert=system&sslcert=${encodeURIComponent(file('c.pem', 'CERT'))}&sslkey=${encodeURIComponent(file('k.pem', 'KEY'))}`;
    expect(connectionTls(url, readFile).ssl).toEqual({ rejectUnauthorized: true, cert: 'CERT', key: 'KEY' });
  });

  it('no TLS parameters or sslmode=disable: no TLS, whatever PGSSLMODE says', () => {
    expect(connectionTls('postgres://sink@db/x', readFile).ssl).toBe(false);
    expect(connectionTls('postgres://sink@db/x?sslmode=disable', readFile)).toEqual({
      url: 'postgres://sink@db/x',
      ssl: false,
    });
  });

  it('refuses what would not verify the server, and names a missing file', () => {
    expect(() => connectionTls('postgres://sink@db/x?sslmode=require', readFile)).toThrow(/sslmode=require/);
    expect(() => connectionTls('postgres://sink@db/x?sslmode=verify-ca&sslrootcert=%2Fca', readFile)).toThrow(
      /verify-ca/,
    );
    expect(() => connectionTls('postgres://sink@db/x?sslmode=verify-full&sslrootcert=%2Fnope', readFile)).toThrow(
      /cannot read sslrootcert \/nope: ENOENT/,
    );
  });

  it('reads no file without a reader that reads (the sink library itself reads none)', () => {
    expect(connectionTls('postgres://sink@db/x?sslmode=verify-full&sslrootcert=system', NO_FILES).ssl).toEqual({
      rejectUnauthorized: true,
    });
    expect(() =>
      connectionTls(
        `postgres://sink@db/x?sslmode=verify-full&sslrootcert=${encodeURIComponent(file('ca2.pem', 'CA'))}`,
        NO_FILES,
      ),
    ).toThrow(/cannot read sslrootcert \/etc\/pg\/ca2.pem: .*reads no files itself/);
  });

  it('tells a Unix socket URL from a TCP one', () => {
    expect(isSocketUrl('postgres:///x?host=%2Fvar%2Frun%2Fpostgresql')).toBe(true);
    expect(isSocketUrl('postgres://sink@%2Fvar%2Frun%2Fpostgresql/x')).toBe(true);
    expect(isSocketUrl('postgres://sink@db:5432/x')).toBe(false);
    expect(isSocketUrl('postgres://sink@127.0.0.1/x?host=db.internal')).toBe(false);
  });
});
