/**
 * One worker WebSocket: decode and route frames (decisions in core/dispatch), open or resume the
 * session on `hello`, hand each request to its service, send replies and pushes. Requests are
 * served concurrently; replies carry `inReplyTo`. Nothing a frame does can throw out of here.
 *
 * Frames sent to one worker in the same turn of the event loop (a grant batch, a batch of
 * completes) leave in one socket write: the first send of a turn corks the byte stream under the
 * WebSocket and a `process.nextTick` uncorks it, after the turn's promise continuations have run.
 * Under the task-cycle load each `writev` cost ~17% of the coordinator's CPU (docs/benchmarks.md).
 */
import {
  DEFAULT_JSON_LIMITS,
  FEATURE_COMPLETE_NEXT,
  FEATURE_SESSION_DRAIN,
  type Clock,
  type CoordinatorMessage,
  type Hello,
  type WorkerMessage,
  TurnCork,
  type Corkable,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import {
  AbuseCounter,
  CLOSE_POLICY_VIOLATION,
  ConnectionPhase,
  decodeWorkerFrame,
  refuseBinaryFrame,
  routeMessage,
} from '../core/dispatch.js';
import { errorFrame, failureReply } from '../core/replies.js';
import type { Metrics } from '../metrics.js';
import type { WorkerChannel } from '../service/channel.js';
import type { CarriedAcquires } from '../service/carried-acquire.js';
import type { GrantService } from '../service/grants.js';
import type { LeaseService } from '../service/leases.js';
import type { LocalSession, SessionManager } from '../service/sessions.js';
import type { WorkerIdentity } from './worker-auth.js';

export interface ConnectionDeps {
  readonly sessions: SessionManager;
  readonly grants: GrantService;
  readonly leases: LeaseService;
  readonly carried: CarriedAcquires;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly coordinatorId: string;
  readonly maxPayloadBytes: number;
  readonly maxJsonDepth: number;
  readonly maxBadFrames: number;
  readonly heartbeatIntervalMs: number;
  readonly sessionTtlMs: number;
}

/**
 * What a worker connection needs of its socket: a `ws` WebSocket (`ws/server.ts` adapts one) or an
 * in-process pair (`@leasehold/testing`). Frames come in through {@link WorkerConnection.receive}.
 */
export interface WorkerSocket {
  /** Frames can be sent. */
  readonly isOpen: boolean;
  /** Closed for good (not merely closing). */
  readonly isClosed: boolean;
  send(text: string): void;
  close(code: number, reason: string): void;
}

/** The optional protocol features this coordinator names in `welcome` (protocol.md). */
const FEATURES = [FEATURE_COMPLETE_NEXT, FEATURE_SESSION_DRAIN];

export class WorkerConnection implements WorkerChannel {
  readonly #socket: WorkerSocket;
  readonly #cork: TurnCork;
  readonly #deps: ConnectionDeps;
  readonly #abuse: AbuseCounter;
  readonly #identity: WorkerIdentity;
  #log: Logger;
  #phase: ConnectionPhase = ConnectionPhase.AWAITING_HELLO;
  #session: LocalSession | undefined;

  constructor(socket: WorkerSocket, deps: ConnectionDeps, identity: WorkerIdentity, stream?: Corkable) {
    this.#socket = socket;
    this.#cork = new TurnCork(stream, (uncork) => {
      process.nextTick(uncork);
    });
    this.#deps = deps;
    this.#identity = identity;
    this.#abuse = new AbuseCounter(deps.maxBadFrames);
    this.#log = deps.log;
  }

  /** A frame arrived on the socket. */
  receive(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      const refused = refuseBinaryFrame();
      this.#refuse(refused.error.code, refused.error, refused.close);
      return;
    }
    this.#onFrame(data);
  }

  /** The socket is closed (by either side). */
  closed(): void {
    this.#phase = ConnectionPhase.CLOSED;
    if (this.#session !== undefined) this.#deps.sessions.detach(this.#session, this);
  }

  get isOpen(): boolean {
    return this.#socket.isOpen;
  }

  send(message: CoordinatorMessage): boolean {
    if (!this.isOpen) return false;
    // Per frame: no log object is built unless debug is on (allocation per frame shows up in GC).
    if (this.#log.isLevelEnabled('debug')) this.#log.debug({ type: message.type }, 'send');
    this.#cork.hold();
    this.#socket.send(JSON.stringify(message));
    return true;
  }

  close(code: number, reason: string): void {
    if (this.#socket.isClosed) return;
    this.#phase = ConnectionPhase.CLOSED;
    this.#socket.close(code, reason);
  }

  #onFrame(bytes: Buffer): void {
    const decoded = decodeWorkerFrame(bytes.toString('utf8'), bytes.length, this.#deps.maxPayloadBytes, {
      maxDepth: this.#deps.maxJsonDepth,
      maxEntries: DEFAULT_JSON_LIMITS.maxEntries,
    });
    if (!decoded.ok) {
      this.#refuse(decoded.error.code, decoded.error);
      return;
    }
    const route = routeMessage(this.#phase, decoded.message);
    switch (route.action) {
      case 'refuse':
        this.#refuse(route.error.code, route.error, route.close);
        return;
      case 'hello':
        this.#onHello(route.hello);
        return;
      case 'handle':
        this.#dispatch(route.message);
        return;
    }
  }

  #refuse(code: string, error: CoordinatorMessage, closeCode?: number): void {
    this.#deps.metrics.badFrames.inc({ code: code.toLowerCase() });
    this.send(error);
    if (closeCode !== undefined) this.close(closeCode, code);
    else if (this.#abuse.record()) this.close(CLOSE_POLICY_VIOLATION, 'too many bad frames');
  }

  #onHello(hello: Hello): void {
    const bound = this.#identity.workerId;
    if (bound !== undefined && hello.workerId !== bound) {
      // A credential (or certificate) is one worker's: it cannot open or resume another's session.
      this.#log.warn(
        {
          remote: this.#identity.remote,
          credential: 'worker',
          claimed: hello.workerId,
          keyId: this.#identity.keyId,
          via: this.#identity.via,
        },
        'hello refused: not this worker',
      );
      this.#refuse('FORBIDDEN', errorFrame('FORBIDDEN', `this credential is not worker ${hello.workerId}'s`, hello.id));
      return;
    }
    this.#phase = ConnectionPhase.OPENING;
    this.#deps.sessions.open(hello, this).then(
      (opened) => {
        const { session } = opened;
        this.#session = session;
        this.#log = this.#deps.log.child({ sessionId: session.sessionId, workerId: session.workerId });
        if (this.#phase === ConnectionPhase.CLOSED) {
          this.#deps.sessions.detach(session, this);
          return;
        }
        this.#phase = ConnectionPhase.READY;
        if (opened.previous !== undefined) {
          this.send({ type: 'session.expired', sessionId: opened.previous.sessionId, reason: opened.previous.reason });
        }
        this.send({
          type: 'welcome',
          inReplyTo: hello.id,
          protocolVersion: hello.protocolVersion,
          sessionId: session.sessionId,
          workerId: session.workerId,
          incarnation: session.incarnation,
          coordinatorId: this.#deps.coordinatorId,
          resumed: opened.resumed,
          ttlMs: this.#deps.sessionTtlMs,
          heartbeatIntervalMs: this.#deps.heartbeatIntervalMs,
          features: FEATURES,
        });
        this.#log.info({ resumed: opened.resumed }, 'session opened');
      },
      (err: unknown) => {
        this.#log.warn({ err }, 'hello failed');
        if (this.#phase === ConnectionPhase.OPENING) this.#phase = ConnectionPhase.AWAITING_HELLO;
        this.send(failureReply(err, hello.id));
      },
    );
  }

  #dispatch(message: Exclude<WorkerMessage, Hello>): void {
    const session = this.#session;
    if (session === undefined) return;
    const receivedAtMs = this.#deps.clock.nowMs();
    if (this.#log.isLevelEnabled('debug')) this.#log.debug({ type: message.type }, 'received');
    const reply = (p: Promise<CoordinatorMessage>): void => {
      p.then(
        (m) => this.send(m),
        (err: unknown) => this.send(failureReply(err, message.id)),
      );
    };
    switch (message.type) {
      case 'heartbeat': {
        if (message.sessionId !== session.sessionId) {
          this.send(errorFrame('SESSION_EXPIRED', 'not the session of this connection', message.id));
          return;
        }
        const beat = this.#deps.sessions.heartbeat(session, receivedAtMs);
        this.send(
          beat.ok
            ? {
                type: 'heartbeat.ack',
                inReplyTo: message.id,
                sessionId: session.sessionId,
                ttlMs: Math.max(1, Math.floor(beat.ttlMs)),
              }
            : errorFrame('SESSION_EXPIRED', 'the session deadline has passed', message.id),
        );
        return;
      }
      case 'session.drain':
        if (message.sessionId !== session.sessionId) {
          this.send(errorFrame('SESSION_EXPIRED', 'not the session of this connection', message.id));
          return;
        }
        this.#deps.grants.drain(session);
        this.send({ type: 'session.draining', inReplyTo: message.id, sessionId: session.sessionId });
        return;
      case 'lease.acquire':
        reply(this.#deps.grants.acquire(session, message, receivedAtMs));
        return;
      case 'lease.renew':
        reply(this.#deps.leases.renew(session, message, receivedAtMs));
        return;
      case 'lease.release':
        reply(this.#deps.leases.release(session, message));
        return;
      case 'task.complete':
        // With a carried acquire, the completion's reply is held for the grant (service/carried-acquire.ts).
        this.#deps.carried.complete(session, message, {
          live: () => this.#phase === ConnectionPhase.READY,
          deliver: (m) => {
            this.send(m);
          },
        });
        return;
      case 'task.fail':
        reply(this.#deps.leases.fail(session, message));
        return;
    }
  }
}
