/**
 * The requests of one coordinator connection that wait for their reply: each is answered by the
 * coordinator message whose `inReplyTo` is its id, fails after its timeout, or fails when the
 * connection goes. Shared by the WebSocket transport and any other `CoordinatorTransport`
 * (the in-process one of @leasehold/testing), so that every transport matches replies alike.
 */
import { LeaseholdError, type CoordinatorMessage } from '@leasehold/protocol';

interface Pending {
  readonly resolve: (reply: CoordinatorMessage) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class PendingReplies {
  readonly #pending = new Map<string, Pending>();

  /** The reply to request `id` (a `type` message): rejected UNAVAILABLE after `timeoutMs`. */
  wait(id: string, type: string, timeoutMs: number): Promise<CoordinatorMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new LeaseholdError('UNAVAILABLE', `no reply to ${type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
    });
  }

  /** Fail request `id` with `err` (e.g. its send failed), if it still waits. */
  fail(id: string, err: Error): void {
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    this.#pending.delete(id);
    clearTimeout(pending.timer);
    pending.reject(err);
  }

  /** Answer the request `message` replies to. False: it replies to none waiting (a push, or late). */
  deliver(message: CoordinatorMessage): boolean {
    const inReplyTo = 'inReplyTo' in message ? message.inReplyTo : undefined;
    const pending = inReplyTo === undefined ? undefined : this.#pending.get(inReplyTo);
    if (inReplyTo === undefined || pending === undefined) return false;
    this.#pending.delete(inReplyTo);
    clearTimeout(pending.timer);
    pending.resolve(message);
    return true;
  }

  /** The connection closed with `code`: every waiting request fails UNAVAILABLE (retryable). */
  closed(code: number): void {
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer);
      pending.reject(new LeaseholdError('UNAVAILABLE', `connection closed (${code}) before the reply`));
      this.#pending.delete(id);
    }
  }
}
