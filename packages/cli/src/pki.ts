/**
 * A small private PKI with the `openssl` command (OpenSSL 3): one CA, server certificates for the
 * addresses the services listen on, client certificates whose CN is the holder's name (a worker
 * id for worker mTLS, an etcd user for etcd's client-cert auth). `leasehold cluster up` uses it for
 * TLS on every link by default; the tests use it to run TLS end to end against real processes.
 * Keys are EC P-256, written 0600.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

export interface Pki {
  readonly dir: string;
  /** The CA certificate (PEM file) every party pins. */
  readonly ca: string;
  /** A server certificate for `hosts` (IP addresses or DNS names), created once and reused. */
  server(name: string, hosts: readonly string[]): CertFiles;
  /** A client certificate with subject CN = `commonName`, created once and reused. */
  client(name: string, commonName: string): CertFiles;
}

function openssl(args: readonly string[], cwd: string): void {
  try {
    execFileSync('openssl', [...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: Buffer; code?: string };
    if (e.code === 'ENOENT')
      throw new Error('the `openssl` command is needed for TLS (Debian/Ubuntu: apt-get install openssl)');
    throw new Error(`openssl ${args[0] ?? ''} failed: ${e.stderr?.toString() ?? String(err)}`, { cause: err });
  }
}

const isIp = (host: string) => /^[0-9.]+$/.test(host) || host.includes(':');

/** Open (or create) the PKI in `dir`. */
export function openPki(dir: string, caName = 'leasehold local CA'): Pki {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = join(dir, 'ca.crt');
  const caKey = join(dir, 'ca.key');
  if (!existsSync(ca) || !existsSync(caKey)) {
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        caKey,
        '-out',
        ca,
      ]
        .concat(['-days', '3650', '-subj', `/CN=${caName}`, '-addext', 'basicConstraints=critical,CA:TRUE'])
        .concat(['-addext', 'keyUsage=critical,keyCertSign,cRLSign']),
      dir,
    );
    chmodSync(caKey, 0o600);
  }
  const issue = (name: string, subject: string, extensions: readonly string[]): CertFiles => {
    const cert = join(dir, `${name}.crt`);
    const key = join(dir, `${name}.key`);
    if (existsSync(cert) && existsSync(key)) return { cert, key };
    const csr = join(dir, `${name}.csr`);
    const ext = join(dir, `${name}.ext`);
    writeFileSync(ext, `${extensions.join('\n')}\n`);
    openssl(
      ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'].concat([
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        subject,
      ]),
      dir,
    );
    chmodSync(key, 0o600);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        ca,
        '-CAkey',
        caKey,
        '-CAcreateserial',
        '-days',
        '825',
        '-out',
        cert,
        '-extfile',
        ext,
      ],
      dir,
    );
    return { cert, key };
  };
  return {
    dir,
    ca,
    server: (name, hosts) =>
      issue(name, `/CN=${hosts[0] ?? name}`, [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth,clientAuth',
        `subjectAltName=${hosts.map((h) => (isIp(h) ? `IP:${h}` : `DNS:${h}`)).join(',')}`,
      ]),
    client: (name, commonName) =>
      issue(name, `/CN=${commonName}`, [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=clientAuth',
      ]),
  };
}

/** PEM text of a file (for `tls.ca` and friends). */
export function pem(path: string): string {
  return readFileSync(path, 'utf8');
}
