/**
 * The certificate and key material the configuration names, read through the caller's `readFile`
 * (the daemon's main.ts passes `readFileSync`; an embedding passes its own): the library itself
 * names files, it does not decide how they are read. The HTTPS server's material is a function,
 * read again on `reloadTls()` (SIGHUP).
 */
import { readFileSync } from 'node:fs';
import type { CoordinatorConfig } from './config.js';

export type ReadFile = (path: string) => Buffer;

/** Until main.ts passes its own reader (see CoordinatorDeps.readFile). */
export const readFileFromDisk: ReadFile = (path) => readFileSync(path);

export interface ServerTlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer;
}

export interface CoordinatorTlsMaterial {
  /** The HTTPS server's certificate, key and client CA (read now, and again on reload). */
  readonly server: (() => ServerTlsMaterial) | undefined;
  /** etcd's CA and the coordinator's client certificate. */
  readonly etcd: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer } | undefined;
  /** The sink's CA, pinned. */
  readonly sinkCa: Buffer | undefined;
}

export function tlsMaterialOf(config: CoordinatorConfig, readFile: ReadFile): CoordinatorTlsMaterial {
  const tls = config.http.tls;
  const { caFile, certFile, keyFile } = config.etcd;
  return {
    server:
      tls === undefined
        ? undefined
        : () => ({
            cert: readFile(tls.certFile),
            key: readFile(tls.keyFile),
            ...(tls.clientCaFile === undefined ? {} : { ca: readFile(tls.clientCaFile) }),
          }),
    etcd:
      caFile === undefined
        ? undefined
        : {
            ca: readFile(caFile),
            ...(certFile === undefined || keyFile === undefined
              ? {}
              : { cert: readFile(certFile), key: readFile(keyFile) }),
          },
    sinkCa: config.sink.caFile === undefined ? undefined : readFile(config.sink.caFile),
  };
}
