/**
 * Settles attempts whose lease ended without the holder ending them: the session expired or was
 * revoked, the worker died, its coordinator died. Such a task is still `pending` with its attempt
 * `open` (the grant's record) and no owner key with the attempt's token. Settling writes what the
 * lifecycle says — the attempt recorded as `expired`, the task pending after its backoff, or failed
 * when no attempt is left — so a task that kills every worker it lands on ends `failed`.
 *
 * Who settles: the coordinator that ended the session, at once (it freed the owner keys itself);
 * every other coordinator after `settleGraceMs` (default 0: at once too), if the attempt is still
 * unsettled by then (the serving coordinator died, or the lease expired in etcd). The txn compares
 * the task key's mod_revision with the attempt's token, so only one settlement lands; the others
 * cost one failed compare each — raise the grace to trade takeover latency after a coordinator's
 * death for fewer of them. After an index rebuild the whole index is swept the same way.
 */
import type { Clock, RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { attemptFailed, LEASE_LOST_ERROR, policyOf } from '../core/lifecycle.js';
import type { TaskRecord } from '../core/records.js';
import { entryOf, recordOf, type OwnerEntry, type PendingTask, type TaskIndex } from '../core/task-index.js';
import { encodeTask } from '../core/task-record.js';
import type { TimerHandle, Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { HeldOwner, LeaseStore, SettleArgs } from '../store/port.js';
import { lifecycleEnv, type LifecycleContext } from './context.js';

/** What settling lost attempts uses. */
export interface SettleContext extends LifecycleContext {
  readonly config: Pick<CoordinatorConfig, 'settleGraceMs' | 'retryPolicy'>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly repeats: RepeatGate;
  readonly metrics: Pick<Metrics, 'lifecycle' | 'taskFailures' | 'taskAttempts'>;
  readonly store: Pick<LeaseStore, 'task' | 'settleLostAttempt'>;
  readonly index: Pick<TaskIndex, 'pendingTask' | 'lostAttempts' | 'isLost' | 'ownerOf' | 'applyOwnWrite'>;
}

/** Longest wait between retries of a settlement that failed (etcd unavailable). */
const MAX_RETRY_MS = 10_000;

export class SettleService {
  readonly #ctx: SettleContext;
  /** Settlements scheduled or running, by task id -> the attempt's token. */
  readonly #pending = new Map<string, { readonly token: bigint; timer: TimerHandle | undefined }>();
  #closed = false;

  constructor(ctx: SettleContext) {
    this.#ctx = ctx;
  }

  /**
   * An owner key is gone. `servedHere`: this coordinator ended its session itself (settle now);
   * otherwise settle after the grace period, unless someone else did by then.
   */
  ownerGone(owner: OwnerEntry, servedHere: boolean): void {
    const task = this.#ctx.index.pendingTask(owner.taskId);
    if (task?.open !== true || task.modRevision !== owner.token) return;
    this.#schedule(task.taskId, owner.token, servedHere ? 0 : this.#ctx.config.settleGraceMs);
  }

  /**
   * The settlements an end of these held owner keys can carry in its own txn (see the store's
   * `endSession`): for each owner key whose task's attempt is open at its token, the settled
   * record. Layout v1 records are left to the ordinary settlement (their moves need a read).
   */
  foldable(held: readonly HeldOwner[]): SettleArgs[] {
    const out: SettleArgs[] = [];
    for (const h of held) {
      const owner = this.#ctx.index.ownerOf(h.resource);
      if (owner?.token !== h.token) continue;
      const task = this.#ctx.index.pendingTask(owner.taskId);
      if (task?.open !== true || task.legacy || task.modRevision !== h.token || task.resource !== h.resource) continue;
      const prev = recordOf(task);
      out.push({ token: h.token, prev, next: this.#settled(prev, h.token) });
    }
    return out;
  }

  /**
   * An end txn carried these settlements and landed at `revision`: the index learns the settled
   * records now (the watch would say so a round trip later), and they count as settled here.
   */
  folded(settled: readonly SettleArgs[], revision: bigint): void {
    const { index, config } = this.#ctx;
    for (const s of settled) {
      const known = index.pendingTask(s.next.taskId);
      if (known !== undefined) {
        const stored = {
          record: s.next,
          value: encodeTask(s.next),
          createRevision: known.createRevision,
          modRevision: revision,
        };
        index.applyOwnWrite(entryOf(stored, config.retryPolicy), s.token);
      }
      this.#count(s.next, s.token);
    }
  }

  /** After an index (re)build: every lost attempt the index shows, after the grace period. */
  sweep(): void {
    for (const task of this.#ctx.index.lostAttempts()) {
      this.#schedule(task.taskId, task.modRevision, this.#ctx.config.settleGraceMs);
    }
  }

  close(): void {
    this.#closed = true;
    for (const entry of this.#pending.values()) this.#ctx.timers.clearTimeout(entry.timer);
    this.#pending.clear();
  }

  /** How many settlements are waiting (tests, metrics). */
  get scheduled(): number {
    return this.#pending.size;
  }

  #schedule(taskId: string, token: bigint, delayMs: number): void {
    if (this.#closed || this.#pending.get(taskId)?.token === token) return;
    const entry: { readonly token: bigint; timer: TimerHandle | undefined } = { token, timer: undefined };
    this.#pending.set(taskId, entry);
    this.#arm(taskId, entry, delayMs, 0);
  }

  #arm(
    taskId: string,
    entry: { readonly token: bigint; timer: TimerHandle | undefined },
    ms: number,
    failures: number,
  ) {
    const run = (): void => {
      entry.timer = undefined;
      void this.#settle(taskId, entry.token).then(
        () => {
          if (this.#pending.get(taskId) === entry) this.#pending.delete(taskId);
        },
        (err: unknown) => {
          if (this.#closed || this.#pending.get(taskId) !== entry) return;
          const retryMs = Math.min(MAX_RETRY_MS, 200 * 2 ** Math.min(failures, 6));
          const gate = this.#ctx.repeats.note('settle', this.#ctx.clock.nowMs());
          if (gate.log) {
            this.#ctx.log.warn(
              { err, taskId, retryMs, repeated: gate.suppressed },
              'could not settle a lost attempt; will retry',
            );
          }
          this.#arm(taskId, entry, retryMs, failures + 1);
        },
      );
    };
    if (ms <= 0) queueMicrotask(run);
    else entry.timer = this.#ctx.timers.setTimeout(run, ms);
  }

  async #settle(taskId: string, token: bigint): Promise<void> {
    const { index, store, metrics } = this.#ctx;
    const task: PendingTask | undefined = index.pendingTask(taskId);
    // Already settled, closed by its holder, or held again: nothing to do.
    if (task === undefined || task.modRevision !== token || !index.isLost(task)) return;
    // A record of layout v1 is read whole (its payload and history move out with this write).
    const stored = task.legacy ? await store.task(taskId) : undefined;
    if (task.legacy && stored?.modRevision !== token) return;
    const prev = stored?.record ?? recordOf(task);
    const next = this.#settled(prev, token);
    const res = await store.settleLostAttempt({ token, prev, next, legacy: stored?.legacy });
    if (res.kind === 'rewritten') this.#count(next, token);
    else metrics.lifecycle.inc({ change: 'settle', outcome: res.kind });
  }

  /** A settlement landed: its metrics and its log line. */
  #count(next: TaskRecord, token: bigint): void {
    const { metrics, log } = this.#ctx;
    metrics.lifecycle.inc({ change: 'settle', outcome: 'rewritten' });
    const outcome = next.state === 'failed' ? 'failed' : 'retrying';
    metrics.taskFailures.inc({ reason: 'expired', outcome });
    if (next.state === 'failed') metrics.taskAttempts.observe({ outcome: 'failed' }, next.attempts);
    log.info(
      { taskId: next.taskId, resource: next.resource, token: token.toString(), outcome, notBeforeMs: next.notBeforeMs },
      'lost attempt settled',
    );
  }

  #settled(record: TaskRecord, token: bigint): TaskRecord {
    const env = lifecycleEnv(this.#ctx);
    if (record.open !== undefined) {
      return attemptFailed(record, token, { ...LEASE_LOST_ERROR, retryable: true }, 'expired', env);
    }
    // No attempt open but none left either (a record of an older coordinator): fail it.
    const max = policyOf(record, env.defaults).maxAttempts;
    return {
      ...record,
      state: 'failed',
      lastError: { name: 'AttemptsExhausted', message: `${record.attempts} of ${max} attempts used` },
      lastEvent: 'failed',
      atMs: env.nowMs,
      endedAtMs: env.nowMs,
    };
  }
}
