/**
 * One WebSocket connection to one coordinator: request/reply correlation by message id, pushes
 * delivered to a callback, every failure turned into a rejected request or a close callback.
 *
 * Frames sent in one turn of the event loop (the completes and acquires of slots that finished
 * together, renewals of one heartbeat) leave in one socket write, as the coordinator's do: the first
 * request of a turn corks the socket under the WebSocket and a `process.nextTick` uncorks it.
 */
import {
  CoordinatorMessageSchema,
  fastCoordinatorMessage,
  LeaseholdError,
  TurnCork,
  type CarriedAcquire,
  type Corkable,
  type CoordinatorMessage,
  type WorkerMessage,
} from '@leasehold/protocol';
import type { TlsClientOptions } from '@leasehold/sink-client';
import { WebSocket } from 'ws';
import { PendingReplies } from './pending-replies.js';

export interface ConnectionOptions {
  readonly url: string;
  /** The bearer credential: `<keyId>:<secret>` (the worker's own) or a shared dev key. */
  readonly key: string;
  /** For wss://: the coordinators' CA (pinned) and a client certificate (mTLS). */
  readonly tls?: TlsClientOptions;
  readonly connectTimeoutMs: number;
  readonly onPush: (message: CoordinatorMessage) => void;
  readonly onClose: (code: number, reason: string) => void;
}

/** One open connection to a coordinator, as the session uses it. */
export interface TransportConnection {
  readonly url: string;
  readonly isOpen: boolean;
  /** Send a request and resolve with its reply (which may be an `error` message). */
  request(message: WorkerRequest, timeoutMs: number): Promise<CoordinatorMessage>;
  /**
   * Send a `task.complete` that carries the slot's next acquire (`next`, given its own message id):
   * the completion's reply, and the acquire's (within `next.timeoutMs`). Optional: a transport
   * without it never carries one (the SDK then sends the acquire on its own).
   */
  requestCarrying?(message: CompleteRequest, timeoutMs: number, next: NextAcquire): CarryingReplies;
  close(code?: number, reason?: string): void;
  /** Drop the connection without a closing handshake. */
  terminate(): void;
  /** Settles once the underlying socket is gone (after `close()` or `terminate()`); optional for fakes. */
  readonly gone?: Promise<void>;
}

/**
 * How a worker reaches coordinators: the seam a unit test replaces (the default is a WebSocket to
 * `<url>/v1/worker` with the worker's bearer key).
 */
export interface CoordinatorTransport {
  connect(options: ConnectionOptions): Promise<TransportConnection>;
}

export const webSocketTransport: CoordinatorTransport = {
  connect: (options) => CoordinatorConnection.open(options),
};

/** A request: any worker message; the connection assigns its `id`. */
export type WorkerRequest = WorkerMessage extends infer M ? (M extends { id: string } ? Omit<M, 'id'> : never) : never;

/** A `task.complete` request, without the acquire it may carry. */
export type CompleteRequest = Omit<Extract<WorkerRequest, { type: 'task.complete' }>, 'next'>;

/** The acquire a `task.complete` carries: its fields but the message id, and how long to wait for its reply. */
export interface NextAcquire {
  readonly acquire: Omit<CarriedAcquire, 'id'>;
  readonly timeoutMs: number;
}

/** The replies to a `task.complete` and to the acquire it carried. */
export interface CarryingReplies {
  readonly reply: Promise<CoordinatorMessage>;
  readonly next: Promise<CoordinatorMessage>;
}

/**
 * `reply` with a no-op rejection handler attached: a carried acquire's reply is awaited only by a
 * slot that goes on, and a rejection nobody awaits must not end the process. Whoever awaits it
 * still sees the rejection.
 */
export function handled(reply: Promise<CoordinatorMessage>): Promise<CoordinatorMessage> {
  reply.catch(() => undefined);
  return reply;
}

/** The replies of a `requestCarrying` on a closed connection: both fail UNAVAILABLE (the second handled). */
export function closedReplies(): CarryingReplies {
  const closed = (): Promise<CoordinatorMessage> =>
    Promise.reject(new LeaseholdError('UNAVAILABLE', 'connection closed'));
  return { reply: closed(), next: handled(closed()) };
}

/** How long a closing handshake may take before the socket is dropped (a paused peer never answers). */
const CLOSE_HANDSHAKE_MS = 1_000;

export class CoordinatorConnection implements TransportConnection {
  readonly url: string;
  readonly gone: Promise<void>;
  readonly #ws: WebSocket;
  readonly #replies = new PendingReplies();
  readonly #opts: ConnectionOptions;
  /** The socket under the WebSocket (from the upgrade response), corked for one turn by `request`. */
  readonly #cork: TurnCork;
  #seq = 0;
  #closed = false;

  private constructor(ws: WebSocket, opts: ConnectionOptions, stream?: Corkable) {
    this.#ws = ws;
    this.#cork = new TurnCork(stream, (uncork) => {
      process.nextTick(uncork);
    });
    this.#opts = opts;
    this.url = opts.url;
    this.gone = new Promise((resolve) => {
      ws.once('close', () => {
        resolve();
      });
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const text = Array.isArray(data)
        ? Buffer.concat(data)
        : Buffer.isBuffer(data)
          ? data
          : Buffer.from(new Uint8Array(data));
      this.#onFrame(text.toString('utf8'));
    });
    ws.on('close', (code, reason) => {
      this.#teardown(code, reason.toString());
    });
    ws.on('error', () => {
      // 'close' follows; the error itself carries nothing the caller can act on.
    });
  }

  static open(opts: ConnectionOptions): Promise<CoordinatorConnection> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(new URL('/v1/worker', opts.url), {
        headers: opts.key === '' ? {} : { authorization: `Bearer ${opts.key}` },
        ...(opts.tls?.ca === undefined ? {} : { ca: opts.tls.ca }),
        ...(opts.tls?.cert === undefined ? {} : { cert: opts.tls.cert }),
        ...(opts.tls?.key === undefined ? {} : { key: opts.tls.key }),
        ...(opts.tls?.servername === undefined ? {} : { servername: opts.tls.servername }),
        handshakeTimeout: opts.connectTimeoutMs,
        perMessageDeflate: false,
      });
      const fail = (err: Error) => {
        ws.removeAllListeners();
        ws.on('error', () => undefined);
        ws.terminate();
        reject(new LeaseholdError('UNAVAILABLE', `cannot connect to ${opts.url}: ${err.message}`, { cause: err }));
      };
      ws.once('error', fail);
      ws.once('unexpected-response', (_req, res) => {
        const code = res.statusCode === 401 ? 'UNAUTHENTICATED' : res.statusCode === 403 ? 'FORBIDDEN' : 'UNAVAILABLE';
        ws.removeAllListeners();
        ws.on('error', () => undefined);
        ws.terminate();
        reject(new LeaseholdError(code, `coordinator ${opts.url} refused the upgrade: HTTP ${res.statusCode}`));
      });
      let stream: Corkable | undefined;
      ws.once('upgrade', (res) => {
        stream = res.socket;
      });
      ws.once('open', () => {
        ws.removeAllListeners();
        resolve(new CoordinatorConnection(ws, opts, stream));
      });
    });
  }

  get isOpen(): boolean {
    return !this.#closed && this.#ws.readyState === WebSocket.OPEN;
  }

  /** Send a request and resolve with its reply (which may be an `error` message). */
  request(message: WorkerRequest, timeoutMs: number): Promise<CoordinatorMessage> {
    if (!this.isOpen) return Promise.reject(new LeaseholdError('UNAVAILABLE', 'connection closed'));
    const id = `${++this.#seq}`;
    const reply = this.#replies.wait(id, message.type, timeoutMs);
    this.#send(JSON.stringify({ ...message, id }), [id]);
    return reply;
  }

  requestCarrying(message: CompleteRequest, timeoutMs: number, next: NextAcquire): CarryingReplies {
    if (!this.isOpen) return closedReplies();
    const id = `${++this.#seq}`;
    const nextId = `${++this.#seq}`;
    const reply = this.#replies.wait(id, message.type, timeoutMs);
    const nextReply = handled(this.#replies.wait(nextId, 'lease.acquire', next.timeoutMs));
    this.#send(JSON.stringify({ ...message, id, next: { ...next.acquire, id: nextId } }), [id, nextId]);
    return { reply, next: nextReply };
  }

  /** Send one frame in this turn's socket write; a failed send fails the requests it carried. */
  #send(text: string, ids: readonly string[]): void {
    this.#cork.hold();
    this.#ws.send(text, (err) => {
      // ws passes null (not undefined) on success, whatever its typings say.
      if (!(err instanceof Error)) return;
      const failed = new LeaseholdError('UNAVAILABLE', `send failed: ${err.message}`, { cause: err });
      for (const id of ids) this.#replies.fail(id, failed);
    });
  }

  close(code = 1000, reason = 'worker closing'): void {
    if (this.#closed) return;
    try {
      this.#ws.close(code, reason);
      const timer = setTimeout(() => {
        this.#ws.terminate();
      }, CLOSE_HANDSHAKE_MS);
      timer.unref();
      void this.gone.then(() => {
        clearTimeout(timer);
      });
    } catch {
      this.#ws.terminate();
    }
    // Do not wait for the peer: requests in flight fail now.
    this.#teardown(code, reason);
  }

  /** Drop the connection without a closing handshake (a dead peer never answers one). */
  terminate(): void {
    this.#ws.terminate();
    this.#teardown(1006, 'terminated');
  }

  #onFrame(text: string): void {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return;
    }
    // The hot frames (a grant, a none, a completed) through the compiled validator; the rest, and
    // anything it is unsure of, through the schema.
    let message = fastCoordinatorMessage(json);
    if (message === undefined) {
      const parsed = CoordinatorMessageSchema.safeParse(json);
      if (!parsed.success) return;
      message = parsed.data;
    }
    if (!this.#replies.deliver(message)) this.#opts.onPush(message);
  }

  #teardown(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#replies.closed(code);
    this.#opts.onClose(code, reason);
  }
}
