/**
 * The worker's slots: `concurrency` loops, each acquiring one lease at a time (acquire.ts) and
 * running it to its end (attempt.ts); a completion carries the slot's next acquire when the
 * coordinator takes one (one frame per task instead of two). The count changes at run time
 * (surplus slots end after their current task). On close: no new acquire, in-flight handlers run on
 * for the grace time, then their signals are aborted; handlers that still run after the force time
 * have their leases released and are no longer waited for.
 */
import { performance } from 'node:perf_hooks';
import type { Grant, RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import { acquireOnce, slotNext, type AcquireDeps, type SlotNext } from './acquire.js';
import { runAttempt, SHUTDOWN, type AttemptDeps } from './attempt.js';
import { delay } from './delay.js';
import { LeaseLostError } from './errors.js';
import { RecentKeys } from './recent-keys.js';
import type { WorkerSession } from './session.js';

export interface SlotDeps<Payload, Result> {
  readonly session: WorkerSession;
  readonly acquire: Omit<AcquireDeps, 'request' | 'ready' | 'log' | 'repeats' | 'stop'>;
  readonly attempt: AttemptDeps<Payload, Result>;
  readonly log: Logger;
  readonly repeats: RepeatGate;
  readonly incarnation: string;
  readonly requestTimeoutMs: number;
  readonly slotErrorDelayMs: number;
  readonly stopping: () => boolean;
  /** Aborted when closing begins: every wait between acquires ends at once. */
  readonly stop: AbortSignal;
  /** Aborted when the force time ran out: attempt reports stop retrying. */
  readonly force: AbortController;
}

interface Running {
  readonly controller: AbortController;
  readonly grant: Grant;
}

export class Slots<Payload, Result> {
  readonly #deps: SlotDeps<Payload, Result>;
  readonly #slots = new Map<number, Promise<void>>();
  readonly #running = new Map<string, Running>(); // `${resource}@${token}`
  /** Grants run lately (the last 4,096): a grant is never run twice, in bounded memory. */
  readonly #started = new RecentKeys(4_096);
  #target: number;

  constructor(deps: SlotDeps<Payload, Result>, concurrency: number) {
    this.#deps = deps;
    this.#target = concurrency;
  }

  get target(): number {
    return this.#target;
  }

  /** Run `n` slots from now on; `fill` starts the missing ones. */
  resize(n: number, fill: boolean): void {
    this.#target = n;
    if (fill) this.fill();
  }

  fill(): void {
    for (let i = 0; i < this.#target; i++) {
      if (this.#slots.has(i)) continue;
      const slot = this.#loop(i).finally(() => this.#slots.delete(i));
      this.#slots.set(i, slot);
    }
  }

  /** Abort the signal of every running handler (`reason` goes to its LeaseLostError). */
  abortAll(reason: string): void {
    for (const r of this.#running.values()) r.controller.abort(new LeaseLostError(reason));
  }

  /** Abort the handler of one grant, if it runs. */
  abort(resource: string, token: bigint, reason: string): void {
    this.#running.get(`${resource}@${token}`)?.controller.abort(new LeaseLostError(reason));
  }

  /** After the stop signal: wait for the slots, for at most grace + force; leaves no timer behind. */
  async drain(graceMs: number, forceMs: number): Promise<void> {
    const slots = Promise.allSettled([...this.#slots.values()]);
    const timers = new AbortController();
    void delay(graceMs, timers.signal).then((elapsed) => {
      if (elapsed) this.abortAll(SHUTDOWN);
    });
    const finished = await Promise.race([
      slots.then(() => true),
      delay(graceMs + forceMs, timers.signal).then(() => false),
    ]);
    timers.abort();
    if (!finished) await this.#forceRelease();
  }

  /** Handlers that ignored their signal past the force time: release their leases, stop waiting. */
  async #forceRelease(): Promise<void> {
    const stuck = [...this.#running.values()];
    const { log, session, incarnation, requestTimeoutMs, force } = this.#deps;
    log.warn({ handlers: stuck.length }, 'handlers still running after the force time; releasing their leases');
    force.abort();
    await Promise.allSettled(
      stuck.map((r) =>
        session.request(
          { type: 'lease.release', resource: r.grant.resource, token: r.grant.token, incarnation, reason: SHUTDOWN },
          requestTimeoutMs,
        ),
      ),
    );
  }

  async #loop(index: number): Promise<void> {
    const d = this.#deps;
    const goesOn = (): boolean => !d.stopping() && index < this.#target;
    // The next acquire, carried by the last completion when the coordinator took one: awaited even
    // when the slot ends (a grant for it is run or, while closing, given back — never left behind).
    let next: SlotNext | undefined;
    while (next?.carried !== undefined || goesOn()) {
      try {
        const carrying = next;
        next = undefined;
        const grant = await acquireOnce(
          {
            ...d.acquire,
            request: (message, timeoutMs, signal) => d.session.request(message, timeoutMs, signal),
            ready: (timeoutMs, signal) => d.session.ready(timeoutMs, signal),
            log: d.log,
            repeats: d.repeats,
            stop: d.stop,
          },
          carrying,
        );
        if (grant !== undefined) {
          next = slotNext(d.acquire, goesOn);
          await this.#run(grant, next);
        }
      } catch (err) {
        if (d.stopping()) return;
        const gate = d.repeats.note(`slot ${index}`, performance.now());
        if (gate.log) d.log.error({ err, slot: index, repeated: gate.suppressed }, 'worker slot failed; continuing');
        await delay(d.slotErrorDelayMs, d.stop);
      }
    }
  }

  async #run(grant: Grant, next: SlotNext): Promise<void> {
    const key = `${grant.resource}@${grant.token}`;
    if (this.#started.has(key)) {
      this.#deps.log.error(
        { resource: grant.resource, token: grant.token },
        'grant delivered twice; not running it again',
      );
      return;
    }
    this.#started.add(key);
    const controller = new AbortController();
    // A grant that arrives while the worker closes is given back at once (its handler never runs).
    if (this.#deps.stopping()) controller.abort(new LeaseLostError(SHUTDOWN));
    this.#running.set(key, { controller, grant });
    try {
      await runAttempt(this.#deps.attempt, grant, controller, next);
    } finally {
      this.#running.delete(key);
    }
  }
}
