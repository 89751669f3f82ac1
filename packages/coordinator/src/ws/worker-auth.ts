/**
 * Who a worker is, decided once at the WebSocket upgrade, from (in order):
 * 1. its own credential — `Authorization: Bearer <keyId>:<secret>` — bound to one worker id in the
 *    coordinator's WORKER_CREDENTIALS ring (secrets compared in constant time);
 * 2. a client certificate verified against TLS_CLIENT_CA (mTLS): the subject's CN is the worker id;
 * 3. INSECURE dev mode only: a shared key from WORKER_KEYS, with which a worker may claim any id.
 * The identity then owns the connection's session: `hello` must name the identity's worker id, so
 * a worker can open, resume and act on only its own sessions.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createKeyRing, parseBearer } from '@leasehold/protocol';
import type { WorkerCredential } from '../config.js';

export interface WorkerIdentity {
  /** The worker id this identity may use; undefined only in the shared-key dev mode (any id). */
  readonly workerId: string | undefined;
  readonly via: 'credential' | 'certificate' | 'shared-key';
  /** Key id of the credential, or the certificate's serial number. */
  readonly keyId: string;
  /** The client's address (set by the WebSocket server, for logs). */
  readonly remote?: string;
}

/** What a connecting worker presented: its `Authorization` header, and a client certificate (TLS). */
export interface PresentedCredentials {
  readonly authorization: string | undefined;
  /** A certificate the TLS layer verified against TLS_CLIENT_CA (undefined: none, or not verified). */
  readonly verifiedCertificate?: { readonly commonName: string | undefined; readonly serialNumber: string };
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

export function createWorkerAuthenticator(options: {
  readonly credentials: readonly WorkerCredential[];
  readonly sharedKeys: readonly string[];
  readonly clientCertificates: boolean;
}): (presented: PresentedCredentials) => WorkerIdentity | undefined {
  const byKeyId = new Map(options.credentials.map((c) => [c.keyId, { ...c, digest: digest(c.secret) }]));
  const shared = createKeyRing(options.sharedKeys);
  return ({ authorization, verifiedCertificate }) => {
    const presented = parseBearer(authorization);
    if (presented !== undefined) {
      const colon = presented.indexOf(':');
      if (colon > 0) {
        const credential = byKeyId.get(presented.slice(0, colon));
        const secret = digest(presented.slice(colon + 1));
        // Compare even for an unknown key id, so timing says nothing about which ids exist.
        const ok = timingSafeEqual(secret, credential?.digest ?? digest('\0')) && credential !== undefined;
        if (ok) return { workerId: credential.workerId, via: 'credential', keyId: credential.keyId };
      }
      if (options.sharedKeys.length > 0 && shared(presented)) {
        return { workerId: undefined, via: 'shared-key', keyId: 'shared' };
      }
      return undefined;
    }
    if (options.clientCertificates && verifiedCertificate !== undefined) {
      const cn = verifiedCertificate.commonName;
      if (cn !== undefined && cn.length > 0) {
        return { workerId: cn, via: 'certificate', keyId: verifiedCertificate.serialNumber };
      }
    }
    return undefined;
  };
}
