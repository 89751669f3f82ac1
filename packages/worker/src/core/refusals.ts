/**
 * When a worker stops itself (pure). Retrying cannot fix a credential every coordinator refuses
 * (`UNAUTHENTICATED` at the upgrade, `FORBIDDEN` for a key bound to another worker id) or a
 * protocol version no coordinator speaks (`PROTOCOL_VERSION_MISMATCH`): those are configuration or
 * deployment errors, and the worker's `run()` rejects with them so that its process exits non-zero.
 * One coordinator refusing while a peer has not yet answered is not enough — during a rolling
 * restart or a key rotation one of them may be behind — so the worker stops once as many refusals
 * in a row as there are coordinators came back with no session opened in between.
 */

export const FATAL_REFUSALS = ['UNAUTHENTICATED', 'FORBIDDEN', 'PROTOCOL_VERSION_MISMATCH'] as const;
export type FatalRefusal = (typeof FATAL_REFUSALS)[number];

export function isFatalRefusal(code: string): code is FatalRefusal {
  return (FATAL_REFUSALS as readonly string[]).includes(code);
}

/** `consecutive` fatal refusals since the last session opened, out of `coordinators` URLs. */
export function shouldStopOnRefusal(consecutive: number, coordinators: number): boolean {
  return consecutive >= Math.max(1, coordinators);
}

/** What the operator should check, by code (the last part of the fatal message). */
export function refusalAdvice(code: FatalRefusal): string {
  switch (code) {
    case 'UNAUTHENTICATED':
      return "check this worker's key id and secret (or client certificate) against the coordinators' WORKER_CREDENTIALS (or TLS_CLIENT_CA)";
    case 'FORBIDDEN':
      return "the credential is bound to another worker id: check workerId against the coordinators' WORKER_CREDENTIALS";
    case 'PROTOCOL_VERSION_MISMATCH':
      return 'the coordinators speak another protocol version: upgrade the worker or the coordinators';
  }
}
