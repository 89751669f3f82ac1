/**
 * A worker of the SDK (`Worker` of `@leasehold/worker`, unchanged) wired to a {@link TestCluster}:
 * its transport is in process, its sink the cluster's in-memory sink, and both pass through its
 * {@link Valve} so the test can pause it. Every event it emits is recorded; {@link TestWorker.next}
 * waits for the next one of a type.
 */
import type { Worker, WorkerEvent } from '@leasehold/worker';
import type { Valve } from './valve.js';
import type { InProcessTransport } from './in-process-transport.js';

type EventOf<T extends WorkerEvent['type']> = Extract<WorkerEvent, { type: T }>;

export class TestWorker {
  /** The SDK's worker (its `on`, `stats`, `state`, `close` are all there). */
  readonly worker: Worker;
  /** Every event the worker emitted, in order. */
  readonly events: WorkerEvent[] = [];
  readonly #valve: Valve;
  readonly #transport: InProcessTransport;
  readonly #seen = new Map<string, number>();
  readonly #waiters = new Set<() => void>();

  constructor(worker: Worker, valve: Valve, transport: InProcessTransport) {
    this.worker = worker;
    this.#valve = valve;
    this.#transport = transport;
    worker.on('*', (event) => {
      if (event.type === 'state') return;
      this.events.push(event);
      for (const wake of [...this.#waiters]) wake();
    });
  }

  get workerId(): string {
    return this.worker.workerId;
  }

  /** Paused: nothing it sends reaches the coordinator or the sink, nothing reaches it. */
  get paused(): boolean {
    return this.#valve.closed;
  }

  /**
   * The next event of `type` (after the ones already taken by earlier `next` calls of that type)
   * that matches `where`; waits up to `timeoutMs` (real time) for it.
   */
  next<T extends WorkerEvent['type']>(
    type: T,
    where: (event: EventOf<T>) => boolean = () => true,
    timeoutMs = 10_000,
  ): Promise<EventOf<T>> {
    const find = (): EventOf<T> | undefined => {
      const from = this.#seen.get(type) ?? 0;
      for (let i = from; i < this.events.length; i += 1) {
        const event = this.events[i];
        if (event?.type === type && where(event as EventOf<T>)) {
          this.#seen.set(type, i + 1);
          return event as EventOf<T>;
        }
      }
      return undefined;
    };
    const found = find();
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(wake);
        reject(new Error(`worker ${this.workerId}: no '${type}' event within ${timeoutMs} ms`));
      }, timeoutMs);
      const wake = (): void => {
        const event = find();
        if (event === undefined) return;
        clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve(event);
      };
      this.#waiters.add(wake);
    });
  }

  /** Grants this worker holds now, as its events tell (granted, not yet ended here). */
  held(): { readonly taskId: string; readonly resource: string; readonly token: bigint }[] {
    const held = new Map<string, { taskId: string; resource: string; token: bigint }>();
    for (const e of this.events) {
      if (!('resource' in e)) continue; // not about a task (state, closing, closed, error)
      const key = `${e.resource}@${e.token}`;
      if (e.type === 'granted') held.set(key, { taskId: e.taskId, resource: e.resource, token: e.token });
      else if (e.type === 'completed' || e.type === 'released' || e.type === 'failed' || e.type === 'lease-lost') {
        held.delete(key);
      }
    }
    return [...held.values()];
  }

  /** Stop it as a SIGSTOP would: its frames and its writes are held until {@link resume}. */
  pause(): void {
    this.#valve.close();
  }

  /** Let it run again: the writes it started while paused land first, then its frames flow. */
  resume(): void {
    this.#valve.open();
  }

  /** Resolves once a write of this (paused) worker waits at the sink's door. */
  writeHeld(): Promise<void> {
    return this.#valve.writeHeld();
  }

  /**
   * Stop the worker (in-flight tasks get `graceMs`); what it held back is dropped. Its acquires
   * are answered at once from now on, so one the coordinator holds (a long poll on the manual
   * clock) does not keep it waiting.
   */
  async close(graceMs = 0): Promise<void> {
    this.#valve.drop();
    const closing = this.worker.close(graceMs);
    this.#transport.closeWorker();
    await closing;
  }
}
