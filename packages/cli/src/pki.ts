/**
 * A small private PKI with the `openssl` command (OpenSSL 3): one CA per directory, server
 * certificates for the addresses the services listen on (extended key usage serverAuth only: a
 * server's key cannot log in anywhere as a client), client certificates whose CN is the holder's
 * name (clientAuth only: a worker id for worker mTLS, an etcd user for etcd's client-cert auth),
 * and peer certificates (both usages) for etcd members talking to each other.
 * `leasehold cluster up` uses two of them (the services' CA, and etcd's own CA that signs nothing
 * but etcd's server and its clients: etcd takes a client's user name from its certificate's CN, so
 * it must trust no CA that signs worker or service certificates); the tests use it to run TLS end
 * to end against real processes. Keys are EC P-256, written 0600.
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
  /** A certificate for both ends of a link between peers (etcd members), created once and reused. */
  peer(name: string, hosts: readonly string[]): CertFiles;
}

/** The extended key usages of each kind of certificate (what a holder may prove to be). */
export const KEY_USAGES = {
  server: 'serverAuth',
  client: 'clientAuth',
  peer: 'serverAuth,clientAuth',
} as const;

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
  const base = ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment'];
  const san = (hosts: readonly string[]) =>
    `subjectAltName=${hosts.map((h) => (isIp(h) ? `IP:${h}` : `DNS:${h}`)).join(',')}`;
  return {
    dir,
    ca,
    server: (name, hosts) =>
      issue(name, `/CN=${hosts[0] ?? name}`, [...base, `extendedKeyUsage=${KEY_USAGES.server}`, san(hosts)]),
    client: (name, commonName) => issue(name, `/CN=${commonName}`, [...base, `extendedKeyUsage=${KEY_USAGES.client}`]),
    peer: (name, hosts) =>
      issue(name, `/CN=${hosts[0] ?? name}`, [...base, `extendedKeyUsage=${KEY_USAGES.peer}`, san(hosts)]),
  };
}

/** PEM text of a file (for `tls.ca` and friends). */
export function pem(path: string): string {
  return readFileSync(path, 'utf8');
}
