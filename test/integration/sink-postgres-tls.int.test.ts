/**
 * The sink → PostgreSQL link over TLS (issue 22), against a real private PostgreSQL (devkit
 * `startLocalPostgres`) serving TLS with a certificate from a test CA that names `localhost` only,
 * and refusing TCP without TLS (`hostssl`). The sink is configured as an operator does
 * (`LEASEHOLD_SINK_DATABASE_SSL_MODE=verify-full`, `LEASEHOLD_SINK_DATABASE_CA`) and started with
 * `createSink`:
 * - with the right CA and host it connects, and every connection it holds is TLS (pg_stat_ssl);
 * - a CA that did not sign the server's certificate: refused;
 * - a host the certificate does not name (127.0.0.1, same server): refused;
 * - without TLS: the server refuses it (the hostssl rule; the control for "TLS is really on").
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPki, type Pki } from '@leasehold/cli/pki';
import { findPostgresBinDir, startLocalPostgres, type LocalPostgres } from '@leasehold/devkit';
import { connectionTls, createSink, loadConfig } from '@leasehold/sink';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const pgBin = findPostgresBinDir();
const KEYS = {
  LEASEHOLD_SINK_COORDINATOR_KEYS: 'coordinator-key-pg-tls-0123456789',
  LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: 'k1:pvWG7UtABZERLViHFlLTAKyg1XCMJFG_zZOOP0MyNqU',
};
let dir: string;
let pki: Pki;
let otherCa: Pki;
let server: LocalPostgres;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-pg-tls-'));
  pki = openPki(join(dir, 'pki'), 'leasehold test PostgreSQL CA');
  otherCa = openPki(join(dir, 'other'), 'some other CA');
  const cert = pki.server('postgres', ['localhost']);
  server = await startLocalPostgres({
    tls: { certFile: cert.cert, keyFile: cert.key, required: true },
    settings: { listen_addresses: 'localhost' },
  });
}, 60_000);

afterAll(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The sink, configured like an operator does, on the database at `host`. */
async function startSink(host: string, tls: Record<string, string>) {
  const config = loadConfig(
    {
      ...KEYS,
      LEASEHOLD_SINK_PORT: '0',
      LEASEHOLD_SINK_STORE: 'postgres',
      LEASEHOLD_SINK_DATABASE_URL: `postgres://postgres@${host}:${server.port}/postgres`,
      LEASEHOLD_SINK_LOG_LEVEL: 'silent',
      ...tls,
    },
    [],
  );
  // As main.ts does: the TLS files the URL names are read by the caller, not by the sink.
  const database = connectionTls(config.databaseUrl ?? '', (path) => readFileSync(path, 'utf8'));
  return createSink(config, { logger: pino({ level: 'silent' }), processMetrics: false, database });
}

const verifyFull = (ca: string) => ({
  LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
  LEASEHOLD_SINK_DATABASE_CA: ca,
});

describe.skipIf(pgBin === undefined)('the sink to PostgreSQL over TLS, verify-full', () => {
  it('connects with the CA and the host the certificate names; every connection it holds is TLS', async () => {
    const sink = await startSink('localhost', verifyFull(pki.ca));
    const admin = new pg.Client({ connectionString: server.socketUrl });
    try {
      await admin.connect();
      const { rows } = await admin.query<{ n: string; all_tls: boolean }>(
        `SELECT count(*)::text AS n, bool_and(s.ssl) AS all_tls
           FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.application_name = 'leasehold-sink'`,
      );
      expect(Number(rows[0]?.n)).toBeGreaterThan(0);
      expect(rows[0]?.all_tls).toBe(true);
    } finally {
      await admin.end();
      await sink.close();
    }
  });

  it('refuses a server whose certificate another CA signed', async () => {
    await expect(startSink('localhost', verifyFull(otherCa.ca))).rejects.toThrow(
      /self[- ]signed|unable to verify|unable to get local issuer/i,
    );
  });

  it('refuses a server whose certificate does not name the host it dials', async () => {
    await expect(startSink('127.0.0.1', verifyFull(pki.ca))).rejects.toThrow(
      /does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/,
    );
  });

  it('is refused by the server without TLS (the control: TLS is really on)', async () => {
    await expect(startSink('localhost', { LEASEHOLD_SINK_DATABASE_SSL_MODE: 'disable' })).rejects.toThrow(
      /no pg_hba\.conf entry.*no encryption/,
    );
  });
});
