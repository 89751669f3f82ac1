/**
 * Who may do what on an etcd with authentication on: a client presenting a given certificate and
 * key (no password: etcd takes the user from the certificate's CN), and the outcome of one call —
 * answered, refused by RBAC, or never let in (the TLS handshake failed). The RBAC tests use the
 * difference: a refusal at the handshake is the CA and key-usage check, a permission denial is
 * the user and role check.
 */
import { readFileSync } from 'node:fs';
import { Etcd3, EtcdPermissionDeniedError } from 'etcd3';

export interface CertKeyFiles {
  readonly cert: string;
  readonly key: string;
}

export type EtcdOutcome = 'ok' | 'permission denied' | 'no connection';

/** An etcd client presenting `files`, verifying etcd against `caFile`; short deadlines. */
export function etcdAs(endpoints: readonly string[], caFile: string, files: CertKeyFiles): Etcd3 {
  return new Etcd3({
    hosts: [...endpoints],
    credentials: {
      rootCertificate: readFileSync(caFile),
      certChain: readFileSync(files.cert),
      privateKey: readFileSync(files.key),
    },
    dialTimeout: 1_000,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 2_000 }),
  });
}

/** What etcd did with `call`. */
export async function etcdOutcome(call: () => Promise<unknown>): Promise<EtcdOutcome> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    if (err instanceof EtcdPermissionDeniedError) return 'permission denied';
    if (err instanceof Error && /permission denied/.test(err.message)) return 'permission denied';
    return 'no connection';
  }
}
