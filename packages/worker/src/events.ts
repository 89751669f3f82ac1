/**
 * The worker's events (typed `on` / `once` / `off`, BullMQ-style) and its status stream (an async
 * iterator, like nats.js `status()`): what a handler's task went through, and how the worker's
 * connection to the coordinators is doing.
 */
import type { LeaseholdError } from '@leasehold/protocol';
import type { Logger } from 'pino';

/** The worker's lifecycle: created → running → closing → closed. */
export const WorkerState = {
  CREATED: 'created',
  RUNNING: 'running',
  CLOSING: 'closing',
  CLOSED: 'closed',
} as const;
export type WorkerState = (typeof WorkerState)[keyof typeof WorkerState];

interface TaskRef {
  readonly taskId: string;
  readonly resource: string;
  readonly token: bigint;
}

export type WorkerEvent =
  | ({ readonly type: 'granted' } & TaskRef)
  | ({ readonly type: 'written'; readonly outcome: string } & TaskRef)
  | ({ readonly type: 'refused'; readonly code: string } & TaskRef)
  | ({ readonly type: 'completed'; readonly withResult: boolean } & TaskRef)
  | ({ readonly type: 'released'; readonly reason: string } & TaskRef)
  | ({
      readonly type: 'failed';
      /** The error's name and message as reported. */
      readonly error: { readonly name: string; readonly message: string };
      /** What the coordinator decided: tried again from `notBeforeMs`, or failed for good. */
      readonly outcome: 'retrying' | 'failed';
      readonly notBeforeMs?: number;
    } & TaskRef)
  | ({ readonly type: 'lease-lost'; readonly reason: string } & TaskRef)
  | { readonly type: 'state'; readonly state: WorkerState }
  /** `close()` began: no more acquires; in-flight tasks finish, or are released after the grace time. */
  | { readonly type: 'closing'; readonly reason: 'close' | 'signal' | 'fatal'; readonly signal?: NodeJS.Signals }
  /** The worker is closed: nothing of it runs any more. `error`: it stopped itself on this fatal error. */
  | { readonly type: 'closed'; readonly error?: LeaseholdError }
  /**
   * A fatal error (`fatal: true`: every coordinator refused the credential or the protocol version;
   * the worker closes and `run()` rejects with it).
   */
  | { readonly type: 'error'; readonly error: LeaseholdError; readonly fatal: boolean };

/** Listeners by event type; `'*'` hears every event. */
export type WorkerEventType = WorkerEvent['type'] | '*';
export type WorkerEventOf<T extends WorkerEventType> = T extends '*' ? WorkerEvent : Extract<WorkerEvent, { type: T }>;

/** One status change of the worker's link to the coordinators (`for await (const s of worker.status())`). */
export type WorkerStatus =
  | {
      readonly type: 'connected';
      readonly coordinator: string;
      readonly sessionId: string;
      /** False: a new session (any earlier session and its leases are gone). */
      readonly resumed: boolean;
    }
  | { readonly type: 'disconnected'; readonly coordinator: string; readonly code: number; readonly reason: string }
  | { readonly type: 'reconnecting'; readonly inMs: number; readonly attempt: number }
  /** A coordinator refused the connection or the hello. */
  | { readonly type: 'refused'; readonly coordinator: string; readonly code: string; readonly message: string }
  /** The session (and every lease in it) is gone; a new one is opened. */
  | { readonly type: 'session-lost'; readonly reason: string }
  /** The worker's conservative lease deadline passed without an acknowledgement. */
  | { readonly type: 'deadline-passed' }
  | { readonly type: 'state'; readonly state: WorkerState };

type Listener = (event: never) => void;

export class WorkerEmitter {
  readonly #listeners = new Map<WorkerEventType, Set<Listener>>();
  readonly #log: () => Logger;

  constructor(log: () => Logger) {
    this.#log = log;
  }

  on(type: WorkerEventType, listener: Listener): void {
    let set = this.#listeners.get(type);
    if (set === undefined) this.#listeners.set(type, (set = new Set()));
    set.add(listener);
  }

  off(type: WorkerEventType, listener: Listener): void {
    this.#listeners.get(type)?.delete(listener);
  }

  emit(event: WorkerEvent): void {
    for (const type of [event.type, '*'] as const) {
      for (const listener of [...(this.#listeners.get(type) ?? [])]) {
        try {
          (listener as (e: WorkerEvent) => void)(event);
        } catch (err) {
          this.#log().error({ err, event: event.type }, 'worker event listener threw');
        }
      }
    }
  }
}

/** The most status changes kept for a reader that does not keep up (older ones are dropped). */
const STATUS_BUFFER = 256;

/** Fan-out of status changes to every open `status()` iterator; ends them all on `end()`. */
export class StatusHub {
  readonly #readers = new Set<StatusReader>();
  #ended = false;

  publish(status: WorkerStatus): void {
    for (const r of this.#readers) r.push(status);
  }

  end(): void {
    this.#ended = true;
    for (const r of this.#readers) r.finish();
    this.#readers.clear();
  }

  open(): AsyncIterableIterator<WorkerStatus> {
    const reader = new StatusReader(() => this.#readers.delete(reader));
    if (this.#ended) reader.finish();
    else this.#readers.add(reader);
    return reader;
  }
}

class StatusReader implements AsyncIterableIterator<WorkerStatus> {
  readonly #queue: WorkerStatus[] = [];
  readonly #detach: () => void;
  #waiting: ((r: IteratorResult<WorkerStatus>) => void) | undefined;
  #done = false;

  constructor(detach: () => void) {
    this.#detach = detach;
  }

  push(status: WorkerStatus): void {
    if (this.#done) return;
    if (this.#waiting !== undefined) {
      const w = this.#waiting;
      this.#waiting = undefined;
      w({ value: status, done: false });
      return;
    }
    this.#queue.push(status);
    if (this.#queue.length > STATUS_BUFFER) this.#queue.shift();
  }

  finish(): void {
    if (this.#done) return;
    this.#done = true;
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<WorkerStatus>> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve({ value: queued, done: false });
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.#waiting = resolve));
  }

  return(): Promise<IteratorResult<WorkerStatus>> {
    this.#queue.length = 0;
    this.finish();
    this.#detach();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<WorkerStatus> {
    return this;
  }
}
