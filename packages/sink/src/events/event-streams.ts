/**
 * The open `GET /v1/events` streams of one sink: each is an {@link SseConnection} subscribed to the
 * shared decision feed and to the refusal feed, all sharing one keepalive timer.
 *
 * Bounded per client: what a stream has not yet handed to the kernel is the response's write
 * buffer. Live events never wait for a slow client: when new events are to be sent while more
 * than `maxBufferedBytes` of earlier ones are still unsent, the connection is destroyed (the client
 * reconnects with Last-Event-ID and catches up from the store). So a client holds at most
 * `maxBufferedBytes` plus one commit's events. While catching up, a stream reads the next page
 * only once its buffer has drained.
 *
 * `close()` (shutdown) ends every stream so the HTTP server can close promptly.
 *
 * At most `maxClients` streams, counted when a request is accepted: the route asks
 * {@link EventStreams.refusal} and calls {@link EventStreams.open} in one synchronous step (no
 * await between), and `open` counts the stream before it does anything else — so concurrent opens
 * cannot all pass the check (the coordinator's stream cap could be raced that way: counted only
 * once its etcd watch had started). `open` past the bound is a broken invariant and throws.
 */
import type { ServerResponse } from 'node:http';
import type { SinkRefusalEvent } from '@leasehold/protocol';
import type { Logger } from 'pino';
import { toDecision } from '../http/routes-read.js';
import type { SinkMetrics } from '../metrics.js';
import type { DecisionRow } from '../store/port.js';
import type { DecisionFeed, FeedConsumer, FeedReset, FeedSubscription } from './decision-feed.js';
import type { RefusalFeed } from './refusal-feed.js';
import { formatSseComment, formatSseEvent } from '@leasehold/daemon-kit';

export interface EventStreamsOptions {
  readonly decisions: DecisionFeed;
  readonly refusals: RefusalFeed;
  readonly logger: Logger;
  readonly metrics?: SinkMetrics | undefined;
  /** A comment line on every stream this often. Default 15000. */
  readonly keepaliveMs?: number;
  /** Streams open at once; more are refused with 503. Default 64. */
  readonly maxClients?: number;
  /** A stream whose unsent bytes pass this is cut off. Default 1 MiB. */
  readonly maxBufferedBytes?: number;
}

export interface StreamRequest {
  /** Resume after this seq; undefined = from the end of the log. */
  readonly after: number | undefined;
  readonly remote: string;
}

class SseConnection implements FeedConsumer {
  #closed = false;
  #subscription: FeedSubscription | undefined;
  #offRefusals: (() => void) | undefined;

  constructor(
    readonly res: ServerResponse,
    readonly remote: string,
    readonly maxBufferedBytes: number,
    readonly onCutOff: (connection: SseConnection) => void,
    readonly onClosed: (connection: SseConnection) => void,
  ) {
    res.once('close', () => {
      this.#finish();
    });
  }

  attach(subscription: FeedSubscription, offRefusals: () => void): void {
    if (this.#closed) {
      subscription.close();
      offRefusals();
      return;
    }
    this.#subscription = subscription;
    this.#offRefusals = offRefusals;
  }

  get closed(): boolean {
    return this.#closed;
  }

  send(text: string): void {
    if (this.#keepingUp()) this.res.write(text);
  }

  decisions(rows: readonly DecisionRow[]): void {
    if (!this.#keepingUp()) return;
    let text = '';
    for (const row of rows) text += formatSseEvent({ id: row.seq, event: 'decision', data: decisionData(row) });
    this.res.write(text);
  }

  /** False when closed, or cut off now because too much of what was sent before is still unsent. */
  #keepingUp(): boolean {
    if (this.#closed || this.res.destroyed) return false;
    if (this.res.writableLength <= this.maxBufferedBytes) return true;
    this.onCutOff(this);
    this.res.destroy();
    this.#finish();
    return false;
  }

  reset(reset: FeedReset): void {
    this.send(
      formatSseEvent({ id: reset.resumeAfter, event: 'reset', data: JSON.stringify({ type: 'reset', ...reset }) }),
    );
  }

  refusal(event: SinkRefusalEvent): void {
    this.send(formatSseEvent({ event: 'refusal', data: JSON.stringify(event) }));
  }

  ready(): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    if (this.res.writableLength < this.res.writableHighWaterMark) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve(!this.#closed && !this.res.destroyed);
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }

  failed(): void {
    this.end();
  }

  /** Finish the response (shutdown, or the store failed): the client reconnects and resumes. */
  end(): void {
    if (!this.#closed && !this.res.destroyed) {
      // Once the last chunk is out, close the socket itself: a kept-alive socket that carried an
      // earlier request would otherwise keep a closing server waiting until its shutdown timeout.
      this.res.end(() => {
        this.res.destroy();
      });
    }
    this.#finish();
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#subscription?.close();
    this.#offRefusals?.();
    this.onClosed(this);
  }
}

function decisionData(row: DecisionRow): string {
  return JSON.stringify({ type: 'decision', ...toDecision(row) });
}

export class EventStreams {
  readonly #o: EventStreamsOptions;
  readonly #log: Logger;
  readonly #open = new Set<SseConnection>();
  readonly #maxClients: number;
  #keepalive: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: EventStreamsOptions) {
    this.#o = options;
    this.#log = options.logger;
    this.#maxClients = options.maxClients ?? 64;
  }

  get size(): number {
    return this.#open.size;
  }

  get maxClients(): number {
    return this.#maxClients;
  }

  /** Why another stream would be refused now: the sink is closing, or `maxClients` are open. */
  refusal(): 'closing' | 'full' | undefined {
    if (this.#closed) return 'closing';
    return this.#open.size >= this.#maxClients ? 'full' : undefined;
  }

  /**
   * Take over `res` (headers not yet sent) as an event stream. Call right after {@link refusal}
   * answered undefined, in the same synchronous step.
   */
  open(res: ServerResponse, request: StreamRequest): void {
    if (this.refusal() !== undefined) throw new Error('EventStreams.open past its bound: call refusal() first');
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
      // The connection ends with the stream (never reused): a shutdown need not wait for it to idle.
      connection: 'close',
    });
    const connection = new SseConnection(
      res,
      request.remote,
      this.#o.maxBufferedBytes ?? 1024 * 1024,
      (c) => {
        this.#o.metrics?.eventStreamsCut.inc();
        this.#log.warn({ remote: c.remote, bufferedBytes: c.res.writableLength }, 'slow event stream cut off');
      },
      (c) => {
        this.#open.delete(c);
        this.#o.metrics?.eventStreams.set(this.#open.size);
        if (this.#open.size === 0) this.#stopKeepalive();
      },
    );
    this.#open.add(connection);
    this.#o.metrics?.eventStreams.set(this.#open.size);
    this.#startKeepalive();
    connection.send(formatSseComment('leasehold sink events'));
    const offRefusals = this.#o.refusals.subscribe((event) => {
      connection.refusal(event);
    });
    const subscription = this.#o.decisions.subscribe(connection, request.after);
    connection.attach(subscription, offRefusals);
    this.#log.debug({ remote: request.remote, after: request.after }, 'event stream opened');
  }

  /** End every stream and refuse new ones. */
  close(): void {
    this.#closed = true;
    for (const connection of [...this.#open]) connection.end();
    this.#stopKeepalive();
  }

  #startKeepalive(): void {
    if (this.#keepalive !== undefined) return;
    this.#keepalive = setInterval(() => {
      const comment = formatSseComment('keepalive');
      for (const connection of this.#open) connection.send(comment);
    }, this.#o.keepaliveMs ?? 15_000);
    this.#keepalive.unref();
  }

  #stopKeepalive(): void {
    clearInterval(this.#keepalive);
    this.#keepalive = undefined;
  }
}
