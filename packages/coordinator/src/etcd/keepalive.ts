/**
 * Keeps every session lease this coordinator serves alive over ONE LeaseKeepAlive bidi stream.
 *
 * etcd3's `Lease` opens a stream per lease and a timer per lease; with thousands of sessions that
 * is thousands of streams. Here one stream carries a `{ID}` request per lease per interval, so
 * renewal costs O(sessions) small messages and never O(tasks) (owner keys ride on the session
 * lease). A response with TTL 0 means the lease is gone in etcd: `onLost` is called once.
 *
 * The stream is supervised: an error, an end, or silence longer than 3 intervals drops it and the
 * next tick opens a new one. Failures become state + log, never an unhandled rejection.
 */
import type { ILeaseKeepAliveRequest, ILeaseKeepAliveResponse, IDuplexStream, LeaseClient } from 'etcd3';
import { RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { LeaseKeeper } from './backend.js';

export interface KeepAliveOptions {
  readonly intervalMs: number;
  readonly log: Logger;
  /** The lease no longer exists in etcd (TTL 0 in a keepalive response). */
  readonly onLost: (leaseId: string) => void;
}

type Stream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

export class KeepAliveStream implements LeaseKeeper {
  readonly #client: LeaseClient;
  readonly #opts: KeepAliveOptions;
  readonly #leases = new Set<string>();
  #stream: Stream | undefined;
  #connecting = false;
  #lastResponseAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** One log line per failure loop (a dead etcd is tried every interval), with the count. */
  readonly #repeats = new RepeatGate();

  constructor(client: LeaseClient, opts: KeepAliveOptions) {
    this.#client = client;
    this.#opts = opts;
  }

  start(): void {
    this.#timer = setInterval(() => {
      this.#tick();
    }, this.#opts.intervalMs);
    this.#timer.unref();
  }

  /** Keep `leaseId` alive from now on (sends one keepalive immediately when connected). */
  add(leaseId: string): void {
    this.#leases.add(leaseId);
    if (this.#stream === undefined) this.#connect();
    else this.#send(leaseId);
  }

  remove(leaseId: string): void {
    this.#leases.delete(leaseId);
  }

  get size(): number {
    return this.#leases.size;
  }

  get connected(): boolean {
    return this.#stream !== undefined;
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#drop('closed');
  }

  #tick(): void {
    if (this.#closed) return;
    const silentMs = performance.now() - this.#lastResponseAt;
    if (this.#stream !== undefined && this.#leases.size > 0 && silentMs > 3 * this.#opts.intervalMs) {
      this.#opts.log.warn({ silentMs: Math.round(silentMs) }, 'keepalive stream silent, reopening');
      this.#drop('silent');
    }
    if (this.#stream === undefined) {
      this.#connect();
      return;
    }
    for (const id of this.#leases) this.#send(id);
  }

  #connect(): void {
    if (this.#connecting || this.#closed || this.#leases.size === 0) return;
    this.#connecting = true;
    this.#client
      .leaseKeepAlive()
      .then((stream) => {
        this.#connecting = false;
        if (this.#closed) {
          stream.end();
          return;
        }
        this.#stream = stream;
        this.#lastResponseAt = performance.now();
        stream.on('data', (res: ILeaseKeepAliveResponse) => {
          if (this.#stream === stream) this.#onResponse(res);
        });
        stream.on('error', (err: unknown) => {
          const gate = this.#repeats.note('stream', performance.now());
          if (gate.log) this.#opts.log.warn({ err, repeated: gate.suppressed }, 'keepalive stream failed');
          if (this.#stream === stream) this.#drop('error');
        });
        stream.on('end', () => {
          if (this.#stream === stream) this.#drop('end');
        });
        for (const id of this.#leases) this.#send(id);
      })
      .catch((err: unknown) => {
        this.#connecting = false;
        const gate = this.#repeats.note('open', performance.now());
        if (gate.log) this.#opts.log.warn({ err, repeated: gate.suppressed }, 'keepalive stream could not be opened');
      });
  }

  #onResponse(res: ILeaseKeepAliveResponse): void {
    this.#lastResponseAt = performance.now();
    if (BigInt(res.TTL) <= 0n && this.#leases.has(res.ID)) {
      this.#leases.delete(res.ID);
      this.#opts.onLost(res.ID);
    }
  }

  #send(leaseId: string): void {
    const stream = this.#stream;
    if (stream === undefined) return;
    try {
      stream.write({ ID: leaseId });
    } catch (err) {
      this.#opts.log.warn({ err }, 'keepalive write failed');
      this.#drop('write');
    }
  }

  #drop(why: string): void {
    const stream = this.#stream;
    this.#stream = undefined;
    if (stream === undefined) return;
    this.#opts.log.debug({ why }, 'keepalive stream dropped');
    try {
      stream.on('error', () => undefined);
      stream.end();
    } catch {
      // already broken
    }
  }
}
