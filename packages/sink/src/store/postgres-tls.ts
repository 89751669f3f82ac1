/**
 * TLS from the sink to PostgreSQL, as libpq spells it in the connection URL: `sslmode=verify-full`
 * with `sslrootcert` (a CA file, or `system` for the platform's CAs) and optionally `sslcert` /
 * `sslkey` (a client certificate for PostgreSQL's `cert` authentication). The sink's options
 * (`--database-ssl-mode`, `--database-ca`, ... in config.ts) are written into the URL the same way.
 *
 * Only two modes: `disable` (or none), and `verify-full` — the server's certificate must chain to
 * the CA *and* name the host of the URL. libpq's `prefer`/`allow` fall back to plaintext, and
 * `require`/`verify-ca` accept a certificate for any host: a man in the middle with any
 * certificate of that CA (or, for require, any certificate at all) would read every write. They
 * are refused, not guessed at (node-postgres would treat `require` as `verify-full`).
 *
 * The TLS parameters are taken out of the URL handed to node-postgres: its URL parser would
 * otherwise override the `ssl` options built here.
 */
import type { ConnectionOptions } from 'node:tls';
import { ConfigError } from '../errors.js';

export const SSL_MODES = ['disable', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** The URL's TLS parameters (libpq names), when it has any. */
export interface UrlTls {
  readonly sslmode: string | undefined;
  readonly sslrootcert: string | undefined;
  readonly sslcert: string | undefined;
  readonly sslkey: string | undefined;
}

const PARAMS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;
/** node-postgres's own spellings: refused, the libpq ones are the only ones. */
const FOREIGN = ['ssl', 'sslnegotiation', 'uselibpqcompat', 'sslpassword', 'sslcrl'] as const;

export function urlTls(url: string): UrlTls {
  const q = new URL(url).searchParams;
  return {
    sslmode: q.get('sslmode') ?? undefined,
    sslrootcert: q.get('sslrootcert') ?? undefined,
    sslcert: q.get('sslcert') ?? undefined,
    sslkey: q.get('sslkey') ?? undefined,
  };
}

/** Whether the URL reaches the server over a Unix socket (no TLS there). */
export function isSocketUrl(url: string): boolean {
  const parsed = new URL(url);
  const host = parsed.searchParams.get('host') ?? decodeURIComponent(parsed.hostname);
  return host === '' || host.startsWith('/');
}

/** Problems with the URL's TLS parameters (empty: fine). */
export function urlTlsProblems(url: string): string[] {
  const problems: string[] = [];
  const q = new URL(url).searchParams;
  for (const name of FOREIGN) {
    if (q.has(name)) problems.push(`${name}=: not supported; use sslmode=verify-full with sslrootcert`);
  }
  const t = urlTls(url);
  if (t.sslmode !== undefined && !(SSL_MODES as readonly string[]).includes(t.sslmode)) {
    problems.push(
      `sslmode=${t.sslmode}: only verify-full (the server's certificate checked against the CA and the host) or disable`,
    );
  }
  const files = t.sslrootcert !== undefined || t.sslcert !== undefined || t.sslkey !== undefined;
  if (t.sslmode === 'verify-full') {
    if (t.sslrootcert === undefined) problems.push('sslmode=verify-full needs sslrootcert (a CA file, or system)');
    if ((t.sslcert === undefined) !== (t.sslkey === undefined)) problems.push('sslcert / sslkey: give both or neither');
    if (isSocketUrl(url)) problems.push('sslmode=verify-full over a Unix socket: PostgreSQL has no TLS there');
  } else if (files) {
    problems.push('sslrootcert / sslcert / sslkey: only with sslmode=verify-full');
  }
  return problems;
}

/** A connection string without TLS parameters, and node-postgres's `ssl` option for them. */
export interface PostgresConnection {
  readonly url: string;
  readonly ssl: false | ConnectionOptions;
}

/** For a URL that must name no TLS files: refuses every read. */
export const NO_FILES = (path: string): string => {
  throw new Error(`${path} was not read: the sink reads no files itself (pass the connection, see main.ts)`);
};

/**
 * The connection string without its TLS parameters, and node-postgres's `ssl` option for them,
 * the files read with `readFile` (main.ts passes `fs.readFileSync`). Throws a ConfigError on
 * parameters {@link urlTlsProblems} refuses, or a file it cannot read.
 */
export function connectionTls(url: string, readFile: (path: string) => string): PostgresConnection {
  const problems = urlTlsProblems(url);
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `database URL: ${p}`));
  const t = urlTls(url);
  const parsed = new URL(url);
  for (const name of PARAMS) parsed.searchParams.delete(name);
  if (t.sslmode !== 'verify-full') return { url: parsed.toString(), ssl: false };
  const read = (what: string, path: string): string => {
    try {
      return readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
      throw new ConfigError([`database TLS: cannot read ${what} ${path}: ${code}`]);
    }
  };
  const ssl: ConnectionOptions = {
    // The chain is checked against the CA, and the certificate must name the URL's host (Node's
    // checkServerIdentity; node-postgres passes the host): verify-full.
    rejectUnauthorized: true,
    ...(t.sslrootcert === undefined || t.sslrootcert === 'system' ? {} : { ca: read('sslrootcert', t.sslrootcert) }),
    ...(t.sslcert === undefined || t.sslkey === undefined
      ? {}
      : { cert: read('sslcert', t.sslcert), key: read('sslkey', t.sslkey) }),
  };
  return { url: parsed.toString(), ssl };
}

/** The sink's TLS options (LEASEHOLD_SINK_DATABASE_SSL_MODE, _CA, _CERT, _KEY), as parsed. */
export interface DatabaseTlsOptions {
  readonly sslMode: SslMode | undefined;
  readonly ca: string | undefined;
  readonly cert: string | undefined;
  readonly key: string | undefined;
}

/**
 * The database URL with the sink's TLS options written into it (libpq's parameters), and the
 * problems: TLS is given in one place (the options or the URL), and must be one the store accepts.
 * Pure (config.ts calls it); `prefix` (LEASEHOLD_SINK_) names the options in the problems.
 */
export function databaseUrlWithTls(
  url: string,
  c: DatabaseTlsOptions,
  prefix: string,
): { url: string; problems: string[] } {
  const options = c.sslMode !== undefined || c.ca !== undefined;
  const inUrl = Object.values(urlTls(url)).some((v) => v !== undefined);
  if (options && inUrl) {
    const problem = `${prefix}DATABASE_SSL_MODE: the URL has TLS parameters (sslmode=...) too; give TLS in one place`;
    return { url, problems: [problem] };
  }
  if (!options) {
    if (c.cert !== undefined || c.key !== undefined)
      return { url, problems: [`${prefix}DATABASE_CERT / DATABASE_KEY: only with DATABASE_SSL_MODE=verify-full`] };
    return { url, problems: urlTlsProblems(url).map((p) => `${prefix}DATABASE_URL: ${p}`) };
  }
  const problems: string[] = [];
  const mode = c.sslMode ?? 'verify-full';
  const parsed = new URL(url);
  if (mode === 'verify-full') {
    if (c.ca === undefined) problems.push(`${prefix}DATABASE_CA: required with DATABASE_SSL_MODE=verify-full`);
    if ((c.cert === undefined) !== (c.key === undefined))
      problems.push(`${prefix}DATABASE_CERT / DATABASE_KEY: give both or neither`);
    if (isSocketUrl(url))
      problems.push(
        `${prefix}DATABASE_SSL_MODE: verify-full, but the URL is a Unix socket (PostgreSQL has no TLS there)`,
      );
    parsed.searchParams.set('sslmode', 'verify-full');
    if (c.ca !== undefined) parsed.searchParams.set('sslrootcert', c.ca);
    if (c.cert !== undefined) parsed.searchParams.set('sslcert', c.cert);
    if (c.key !== undefined) parsed.searchParams.set('sslkey', c.key);
  } else {
    if (c.ca !== undefined || c.cert !== undefined || c.key !== undefined)
      problems.push(`${prefix}DATABASE_CA / DATABASE_CERT / DATABASE_KEY: only with DATABASE_SSL_MODE=verify-full`);
    parsed.searchParams.set('sslmode', 'disable');
  }
  // What else the URL carries (node-postgres's own `ssl=` and friends) is refused as without options.
  if (problems.length === 0)
    problems.push(...urlTlsProblems(parsed.toString()).map((p) => `${prefix}DATABASE_URL: ${p}`));
  return { url: parsed.toString(), problems };
}
