/**
 * The worker SDK's `CoordinatorTransport` without a socket: a connection is a pair of in-process
 * ends, the coordinator's handed to `Coordinator.connectWorker` (which checks the credential as a
 * WebSocket upgrade would and runs the same connection code), the worker's given to the SDK. Frames
 * cross as JSON text on a later turn of the event loop, through the worker's {@link Valve} (paused:
 * held both ways).
 */
import type { Coordinator, WorkerSocket } from '@leasehold/coordinator';
import { CoordinatorMessageSchema, LeaseholdError, type CoordinatorMessage } from '@leasehold/protocol';
import {
  closedReplies,
  handled,
  PendingReplies,
  type CarryingReplies,
  type CompleteRequest,
  type ConnectionOptions,
  type NextAcquire,
  type CoordinatorTransport,
  type TransportConnection,
  type WorkerRequest,
} from '@leasehold/worker';
import type { Valve } from './valve.js';

export class InProcessTransport implements CoordinatorTransport {
  readonly #coordinators: ReadonlyMap<string, Coordinator>;
  readonly #valve: Valve;
  readonly #open = new Set<InProcessConnection>();
  #closing = false;

  constructor(coordinators: ReadonlyMap<string, Coordinator>, valve: Valve) {
    this.#coordinators = coordinators;
    this.#valve = valve;
  }

  connect(options: ConnectionOptions): Promise<TransportConnection> {
    const coordinator = this.#coordinators.get(options.url);
    if (coordinator === undefined) {
      return Promise.reject(new LeaseholdError('UNAVAILABLE', `cannot connect to ${options.url}: no such coordinator`));
    }
    const connection = new InProcessConnection(options, this.#valve, {
      gone: () => this.#open.delete(connection),
      closing: () => this.#closing,
    });
    const accepted = coordinator.connectWorker(connection.coordinatorSide, {
      authorization: options.key === '' ? undefined : `Bearer ${options.key}`,
    });
    if (!accepted.ok) {
      const code = accepted.code === 'UNAUTHENTICATED' ? 'UNAUTHENTICATED' : 'UNAVAILABLE';
      return Promise.reject(
        new LeaseholdError(code, `coordinator ${options.url} refused the connection: ${accepted.code}`),
      );
    }
    connection.attach(accepted.worker);
    this.#open.add(connection);
    return Promise.resolve(connection);
  }

  /**
   * The worker is closing: from now on its acquires are answered at once, here, with a retryable
   * SHUTTING_DOWN (a long poll the coordinator holds on its manual clock would keep the worker's
   * `close()` waiting), and the acquires already held are cut off with their connections.
   */
  closeWorker(): void {
    this.#closing = true;
    for (const connection of [...this.#open]) connection.terminate();
  }
}

class InProcessConnection implements TransportConnection {
  readonly url: string;
  readonly #options: ConnectionOptions;
  readonly #valve: Valve;
  readonly #hooks: { readonly gone: () => void; readonly closing: () => boolean };
  readonly #replies = new PendingReplies();
  #peer: { receive(data: Buffer, isBinary: boolean): void; closed(): void } | undefined;
  #seq = 0;
  #closed = false;
  readonly coordinatorSide: WorkerSocket;

  constructor(
    options: ConnectionOptions,
    valve: Valve,
    hooks: { readonly gone: () => void; readonly closing: () => boolean },
  ) {
    this.url = options.url;
    this.#options = options;
    this.#valve = valve;
    this.#hooks = hooks;
    // What the coordinator holds: sending delivers to this worker; closing ends the connection.
    const isClosed = (): boolean => this.#closed;
    this.coordinatorSide = {
      get isOpen() {
        return !isClosed();
      },
      get isClosed() {
        return isClosed();
      },
      send: (text) => {
        this.#valve.frame(() => {
          this.#onFrame(text);
        });
      },
      close: (code, reason) => {
        this.#valve.frame(() => {
          this.#teardown(code, reason);
        });
      },
    };
  }

  attach(peer: { receive(data: Buffer, isBinary: boolean): void; closed(): void }): void {
    this.#peer = peer;
  }

  get isOpen(): boolean {
    return !this.#closed;
  }

  request(message: WorkerRequest, timeoutMs: number): Promise<CoordinatorMessage> {
    if (this.#closed) return Promise.reject(new LeaseholdError('UNAVAILABLE', 'connection closed'));
    const id = `${++this.#seq}`;
    if (message.type === 'lease.acquire' && this.#hooks.closing()) {
      return Promise.resolve({
        type: 'error',
        code: 'SHUTTING_DOWN',
        message: 'the test worker is closing',
        retryable: true,
        inReplyTo: id,
      });
    }
    const text = JSON.stringify({ ...message, id });
    const reply = this.#replies.wait(id, message.type, timeoutMs);
    this.#valve.frame(() => {
      if (!this.#closed) this.#peer?.receive(Buffer.from(text, 'utf8'), false);
    });
    return reply;
  }

  requestCarrying(message: CompleteRequest, timeoutMs: number, next: NextAcquire): CarryingReplies {
    if (this.#closed) return closedReplies();
    if (this.#hooks.closing()) {
      // As for a lone acquire while the worker closes: answered here, at once.
      const shuttingDown: CoordinatorMessage = {
        type: 'error',
        code: 'SHUTTING_DOWN',
        message: 'the test worker is closing',
        retryable: true,
      };
      return { reply: this.request(message, timeoutMs), next: Promise.resolve(shuttingDown) };
    }
    const id = `${++this.#seq}`;
    const nextId = `${++this.#seq}`;
    const text = JSON.stringify({ ...message, id, next: { ...next.acquire, id: nextId } });
    const reply = this.#replies.wait(id, message.type, timeoutMs);
    const nextReply = handled(this.#replies.wait(nextId, 'lease.acquire', next.timeoutMs));
    this.#valve.frame(() => {
      if (!this.#closed) this.#peer?.receive(Buffer.from(text, 'utf8'), false);
    });
    return { reply, next: nextReply };
  }

  close(code = 1000, reason = 'worker closing'): void {
    this.#teardown(code, reason);
  }

  terminate(): void {
    this.#teardown(1006, 'terminated');
  }

  #onFrame(text: string): void {
    if (this.#closed) return;
    const parsed = CoordinatorMessageSchema.safeParse(JSON.parse(text));
    if (!parsed.success) return;
    if (!this.#replies.deliver(parsed.data)) this.#options.onPush(parsed.data);
  }

  #teardown(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#replies.closed(code);
    this.#peer?.closed();
    this.#hooks.gone();
    this.#options.onClose(code, reason);
  }
}
