/**
 * The worker's session with the coordinator tier: connects to one of several coordinators,
 * says hello (resuming the session after a reconnect or a failover), heartbeats at the interval
 * the coordinator asks for (≤ TTL/3), keeps the conservative local deadline, reconnects with
 * jittered backoff, and reports what it learns as callbacks. It never throws from a background
 * loop: failures become state changes and callbacks.
 */
import {
  backoffDelayMs,
  FEATURE_COMPLETE_NEXT,
  FEATURE_SESSION_DRAIN,
  LeaseholdError,
  parseToken,
  PROTOCOL_VERSION,
  RepeatGate,
  type BackoffOptions,
  type CoordinatorMessage,
} from '@leasehold/protocol';
import type { TlsClientOptions } from '@leasehold/sink-client';
import type { Logger } from 'pino';
import {
  handled,
  type CompleteRequest,
  type CoordinatorTransport,
  type NextAcquire,
  type TransportConnection,
  type WorkerRequest,
} from './connection.js';
import { LocalDeadline } from './core/deadline.js';
import { isFatalRefusal } from './core/refusals.js';
import type { WorkerStatus } from './events.js';

export interface SessionOptions {
  readonly coordinators: readonly string[];
  readonly key: string;
  readonly tls?: TlsClientOptions;
  readonly workerId: string;
  readonly incarnation: string;
  readonly capacity: number;
  /** The queues the session serves (sent in every hello, a resume's included). */
  readonly queues: readonly string[];
  readonly logger: Logger;
  readonly requestTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly backoff: BackoffOptions;
  readonly nowMs: () => number;
  readonly random: () => number;
  readonly transport: CoordinatorTransport;
}

export interface SessionEvents {
  /** A session is open. `resumed` false means any earlier session (and its leases) is gone. */
  onSessionStarted(sessionId: string, resumed: boolean): void;
  /** The session is gone (expired, revoked, refused on resume): every lease it held is gone. */
  onSessionLost(reason: string): void;
  onLeaseRevoked(resource: string, token: bigint, reason: string): void;
  /** The local deadline passed without an acknowledgement: leases may be gone. */
  onDeadlinePassed(): void;
  /**
   * A coordinator refused this worker for good (its credential: UNAUTHENTICATED / FORBIDDEN at the
   * upgrade or the hello; its protocol version: PROTOCOL_VERSION_MISMATCH); `consecutive` counts
   * such refusals since the last session opened.
   */
  onRefused?(err: LeaseholdError, consecutive: number): void;
  /** Every change of the link, for the worker's status stream. */
  onStatus?(status: WorkerStatus): void;
}

type State = 'idle' | 'connecting' | 'ready' | 'stopped';

export class WorkerSession {
  readonly deadline = new LocalDeadline();
  readonly #opts: SessionOptions;
  readonly #events: SessionEvents;
  #state: State = 'idle';
  #conn: TransportConnection | undefined;
  #sessionId: string | undefined;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #nextCoordinator = 0;
  /** Credential refusals since the last session opened. */
  #refusals = 0;
  readonly #repeats = new RepeatGate();
  /** The serving coordinator takes an acquire carried in `task.complete` (its welcome said so). */
  #carries = false;
  /** The serving coordinator takes `session.drain` (its welcome said so). */
  #drains = false;
  /** The worker is closing: its acquires should not wait (sent as `session.drain` on every welcome). */
  #draining = false;
  #attempt = 0;
  #waiters: (() => void)[] = [];
  #deadlineReported = false;
  /** The connect (and hello) in flight, settled either way. */
  #connecting: Promise<void> = Promise.resolve();

  constructor(opts: SessionOptions, events: SessionEvents) {
    if (opts.coordinators.length === 0) throw new LeaseholdError('INVALID_MESSAGE', 'no coordinator URLs given');
    this.#opts = opts;
    this.#events = events;
  }

  get sessionId(): string | undefined {
    return this.#sessionId;
  }

  get connectedTo(): string | undefined {
    return this.#state === 'ready' ? this.#conn?.url : undefined;
  }

  start(): void {
    if (this.#state !== 'idle') return;
    this.#connect();
  }

  /**
   * Send a request over the current connection, waiting up to `timeoutMs` for one to be ready.
   * `signal` ends the wait for a connection (not a request already sent: its answer is awaited).
   */
  async request(
    message: WorkerRequest,
    timeoutMs = this.#opts.requestTimeoutMs,
    signal?: AbortSignal,
  ): Promise<CoordinatorMessage> {
    const { conn, left, sentAt } = await this.#connected(timeoutMs, signal);
    return this.#inspect(await conn.request(message, left), sentAt);
  }

  /**
   * A `task.complete` that carries the slot's next acquire, when the serving coordinator takes one
   * (`complete.next` in its welcome) and the transport can send one; `carried` then gets the
   * acquire's reply (seen by the session as a lone acquire's would be). Otherwise a plain
   * `task.complete`, and `carried` is not called: the slot acquires on its own.
   */
  async requestCarrying(
    message: CompleteRequest,
    next: NextAcquire,
    carried: (reply: Promise<CoordinatorMessage>, sentAtMs: number) => void,
    timeoutMs = this.#opts.requestTimeoutMs,
    signal?: AbortSignal,
  ): Promise<CoordinatorMessage> {
    const { conn, left, sentAt } = await this.#connected(timeoutMs, signal);
    if (!this.#carries || conn.requestCarrying === undefined)
      return this.#inspect(await conn.request(message, left), sentAt);
    const replies = conn.requestCarrying(message, left, next);
    carried(handled(replies.next.then((reply) => this.#inspect(reply, sentAt))), sentAt);
    return this.#inspect(await replies.reply, sentAt);
  }

  /** Until a session is open (waited for up to `timeoutMs`): rejects UNAVAILABLE, or SHUTTING_DOWN once stopped. */
  ready(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.#ready(timeoutMs, signal);
  }

  /** The ready connection (waited for up to `timeoutMs`), what is left of `timeoutMs`, and now. */
  async #connected(
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ conn: TransportConnection; left: number; sentAt: number }> {
    const started = this.#opts.nowMs();
    await this.#ready(timeoutMs, signal);
    const conn = this.#conn;
    if (conn === undefined) throw new LeaseholdError('UNAVAILABLE', 'not connected');
    const left = Math.max(1, timeoutMs - (this.#opts.nowMs() - started));
    return { conn, left, sentAt: this.#opts.nowMs() };
  }

  /** What the session learns from a reply (a renewal's acknowledgement, an expired session). */
  #inspect(reply: CoordinatorMessage, sentAt: number): CoordinatorMessage {
    if (reply.type === 'lease.renewed') this.#acknowledge(sentAt, reply.ttlMs);
    // LEASE_EXPIRED means the same as SESSION_EXPIRED (the coordinator judged the session's
    // deadline passed; leases live and die with their session). Either way the session is over for
    // this worker: it never resumes it. Resumed on a peer, it could be adopted with an owner key the
    // worker was told it lost, held for as long as the worker lives (docs/model.md, finding F1).
    if (reply.type === 'error' && (reply.code === 'SESSION_EXPIRED' || reply.code === 'LEASE_EXPIRED'))
      this.#lose(reply.code === 'SESSION_EXPIRED' ? 'session expired' : 'lease expired: the session deadline passed');
    return reply;
  }

  get connected(): boolean {
    return this.#state === 'ready';
  }

  /**
   * Close the connection; the coordinator keeps the session until its deadline (leases released
   * first by the caller). Resolves once the socket is gone.
   */
  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    this.#clearTimers();
    const conn = this.#conn;
    conn?.close(1000, 'worker stopping');
    for (const w of this.#waiters.splice(0)) w();
    await this.#connecting;
    await conn?.gone;
  }

  #ready(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#state === 'ready') return Promise.resolve();
    if (this.#state === 'stopped' || signal?.aborted === true)
      return Promise.reject(new LeaseholdError('SHUTTING_DOWN', 'worker stopped'));
    return new Promise((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#waiters = this.#waiters.filter((w) => w !== onReady);
      };
      const timer = setTimeout(() => {
        settle();
        reject(new LeaseholdError('UNAVAILABLE', `no coordinator reachable within ${timeoutMs} ms`));
      }, timeoutMs);
      const onAbort = () => {
        settle();
        reject(new LeaseholdError('SHUTTING_DOWN', 'worker stopping'));
      };
      const onReady = () => {
        settle();
        if (this.#state === 'ready') resolve();
        else reject(new LeaseholdError('SHUTTING_DOWN', 'worker stopped'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(onReady);
    });
  }

  #connect(): void {
    if (this.#state === 'stopped') return;
    this.#state = 'connecting';
    const url = this.#opts.coordinators[this.#nextCoordinator % this.#opts.coordinators.length] ?? '';
    this.#nextCoordinator += 1;
    const log = this.#opts.logger;
    const ref: { conn?: TransportConnection } = {};
    this.#connecting = this.#opts.transport
      .connect({
        url,
        key: this.#opts.key,
        ...(this.#opts.tls === undefined ? {} : { tls: this.#opts.tls }),
        connectTimeoutMs: this.#opts.connectTimeoutMs,
        onPush: (m) => {
          this.#onPush(m);
        },
        onClose: (code, reason) => {
          // A late close of a connection we already replaced changes nothing.
          if (ref.conn !== undefined && ref.conn === this.#conn) this.#onClose(url, code, reason);
        },
      })
      .then(async (conn) => {
        if (this.#state === 'stopped') {
          conn.close();
          await conn.gone;
          return;
        }
        ref.conn = conn;
        this.#conn = conn;
        await this.#hello(conn);
      })
      .catch((err: unknown) => {
        if (this.#state === 'stopped') return;
        // One line per failure loop (with how many more it hid), not one per reconnect attempt.
        const gate = this.#repeats.note(`connect ${url}`, this.#opts.nowMs());
        if (gate.log) log.warn({ err, coordinator: url, repeated: gate.suppressed }, 'coordinator connection failed');
        if (err instanceof LeaseholdError && isFatalRefusal(err.code)) {
          this.#refusals += 1;
          this.#events.onStatus?.({ type: 'refused', coordinator: url, code: err.code, message: err.message });
          this.#events.onRefused?.(err, this.#refusals);
        }
        if (ref.conn !== undefined && ref.conn === this.#conn) {
          this.#conn = undefined;
          ref.conn.terminate();
        }
        this.#scheduleReconnect();
      });
  }

  async #hello(conn: TransportConnection): Promise<void> {
    const resume = this.#sessionId;
    const sentAt = this.#opts.nowMs();
    const reply = await conn.request(
      {
        type: 'hello',
        protocolVersion: PROTOCOL_VERSION,
        workerId: this.#opts.workerId,
        incarnation: this.#opts.incarnation,
        capacity: this.#opts.capacity,
        queues: [...this.#opts.queues],
        ...(resume === undefined ? {} : { resumeSessionId: resume }),
      },
      this.#opts.requestTimeoutMs,
    );
    if (this.#state === 'stopped') return; // stop() closed the connection meanwhile
    if (reply.type === 'error') {
      if (reply.code === 'SESSION_EXPIRED' && resume !== undefined) {
        // The old session is gone; open a fresh one on the same connection.
        this.#lose('session expired while disconnected');
        await this.#hello(conn);
        return;
      }
      throw new LeaseholdError(reply.code, `hello refused: ${reply.message}`);
    }
    if (reply.type !== 'welcome') throw new LeaseholdError('INVALID_MESSAGE', `expected welcome, got ${reply.type}`);
    if (resume !== undefined && (!reply.resumed || reply.sessionId !== resume)) this.#lose('session not resumed');
    this.#sessionId = reply.sessionId;
    this.#carries = reply.features?.includes(FEATURE_COMPLETE_NEXT) === true;
    this.#drains = reply.features?.includes(FEATURE_SESSION_DRAIN) === true;
    this.#acknowledge(sentAt, reply.ttlMs);
    this.#state = 'ready';
    this.#attempt = 0;
    this.#refusals = 0;
    const hidden = this.#repeats.clear(`connect ${conn.url}`);
    if (hidden > 0) this.#opts.logger.info({ coordinator: conn.url, repeated: hidden }, 'connected after failures');
    this.#opts.logger.info(
      { sessionId: reply.sessionId, coordinator: conn.url, resumed: reply.resumed, ttlMs: reply.ttlMs },
      reply.resumed ? 'session resumed' : 'session started',
    );
    this.#startHeartbeats(conn, reply.heartbeatIntervalMs);
    this.#events.onSessionStarted(reply.sessionId, reply.resumed);
    this.#events.onStatus?.({
      type: 'connected',
      coordinator: conn.url,
      sessionId: reply.sessionId,
      resumed: reply.resumed,
    });
    if (this.#draining) this.#sendDrain(conn, reply.sessionId);
    for (const w of this.#waiters.splice(0)) w();
  }

  /**
   * Whether the serving coordinator takes `session.drain`, so that a closing worker's long polls end
   * at once (the SDK then long-polls longer: options.ts `acquireWaitMs`).
   */
  get drains(): boolean {
    return this.#drains;
  }

  /**
   * The worker is closing: ask the coordinator to answer this session's waiting acquires now, and
   * not to hold its later ones (`session.drain`; again after any new welcome). Without the feature,
   * a long poll in flight runs out on its own.
   */
  drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    const conn = this.#conn;
    const sessionId = this.#sessionId;
    if (this.#state === 'ready' && conn !== undefined && sessionId !== undefined) this.#sendDrain(conn, sessionId);
  }

  #sendDrain(conn: TransportConnection, sessionId: string): void {
    if (!this.#drains || !conn.isOpen) return;
    conn.request({ type: 'session.drain', sessionId }, this.#opts.requestTimeoutMs).then(
      (reply) => {
        if (reply.type === 'error') this.#opts.logger.debug({ code: reply.code }, 'session.drain refused');
      },
      (err: unknown) => {
        // Lost with its connection: the next welcome sends it again.
        this.#opts.logger.debug({ err }, 'session.drain unanswered');
      },
    );
  }

  #startHeartbeats(conn: TransportConnection, intervalMs: number): void {
    clearInterval(this.#heartbeatTimer);
    this.#heartbeatTimer = setInterval(() => {
      const sessionId = this.#sessionId;
      if (sessionId === undefined || !conn.isOpen) return;
      const sentAt = this.#opts.nowMs();
      conn.request({ type: 'heartbeat', sessionId }, Math.max(intervalMs, 250)).then(
        (reply) => {
          if (reply.type === 'heartbeat.ack' && reply.sessionId === this.#sessionId)
            this.#acknowledge(sentAt, reply.ttlMs);
          else if (reply.type === 'error' && reply.code === 'SESSION_EXPIRED') this.#lose('session expired');
        },
        (err: unknown) => {
          // A heartbeat without a reply: the coordinator (or the link) may be dead. Move on.
          this.#opts.logger.warn({ err, coordinator: conn.url }, 'heartbeat unanswered; reconnecting');
          conn.terminate();
        },
      );
    }, intervalMs);
    this.#heartbeatTimer.unref();
  }

  #acknowledge(sentAt: number, ttlMs: number): void {
    this.deadline.acknowledge(sentAt, ttlMs);
    this.#deadlineReported = false;
    this.#armDeadlineTimer();
  }

  #armDeadlineTimer(): void {
    clearTimeout(this.#deadlineTimer);
    const wait = this.deadline.remainingMs(this.#opts.nowMs());
    this.#deadlineTimer = setTimeout(() => {
      if (this.deadline.isValidAt(this.#opts.nowMs())) {
        this.#armDeadlineTimer();
        return;
      }
      if (!this.#deadlineReported) {
        this.#deadlineReported = true;
        this.#opts.logger.warn({ sessionId: this.#sessionId }, 'local lease deadline passed without acknowledgement');
        this.#events.onDeadlinePassed();
        this.#events.onStatus?.({ type: 'deadline-passed' });
      }
    }, wait + 1);
    this.#deadlineTimer.unref();
  }

  #onPush(message: CoordinatorMessage): void {
    switch (message.type) {
      case 'session.expired':
        if (message.sessionId === this.#sessionId) this.#lose(`session expired (${message.reason})`);
        return;
      case 'lease.revoked':
        this.#events.onLeaseRevoked(message.resource, parseToken(message.token), message.reason);
        return;
      default:
        this.#opts.logger.debug({ type: message.type }, 'unsolicited message ignored');
    }
  }

  #lose(reason: string): void {
    if (this.#sessionId === undefined) return;
    this.#opts.logger.warn({ sessionId: this.#sessionId, reason }, 'session lost');
    this.#sessionId = undefined;
    this.deadline.clear();
    clearTimeout(this.#deadlineTimer);
    this.#events.onSessionLost(reason);
    this.#events.onStatus?.({ type: 'session-lost', reason });
    if (this.#state === 'ready') {
      // The coordinator binds a connection to its session: a dead session needs a new connection
      // and a fresh hello. (During a hello the coordinator opens the new session itself.)
      clearInterval(this.#heartbeatTimer);
      const conn = this.#conn;
      this.#conn = undefined;
      this.#state = 'connecting';
      conn?.close(1000, 'session lost');
      this.#scheduleReconnect();
    }
  }

  #onClose(url: string, code: number, reason: string): void {
    clearInterval(this.#heartbeatTimer);
    if (this.#state === 'stopped') return;
    this.#opts.logger.warn({ coordinator: url, code, reason }, 'coordinator connection closed');
    this.#events.onStatus?.({ type: 'disconnected', coordinator: url, code, reason });
    this.#conn = undefined;
    if (this.#state === 'ready') this.#state = 'connecting';
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#state === 'stopped' || this.#reconnectTimer !== undefined) return;
    this.#state = 'connecting';
    const delay = backoffDelayMs(this.#attempt, this.#opts.backoff, this.#opts.random);
    this.#attempt += 1;
    this.#events.onStatus?.({ type: 'reconnecting', inMs: delay, attempt: this.#attempt });
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.#connect();
    }, delay);
  }

  #clearTimers(): void {
    clearInterval(this.#heartbeatTimer);
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
  }
}
