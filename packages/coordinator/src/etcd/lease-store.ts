/**
 * {@link LeaseStore} on a {@link KvBackend} (a real etcd, or the in-memory etcd of the unit tests):
 * each operation is one of the documented transactions in `transactions/`, plus the batching rules
 * (split to fit etcd's 128 ops per txn; when a batch's compares fail, one txn per item tells which).
 * Reads are reads.ts, the watch's parsing store-watch.ts, the console's revocations
 * console-revocation-store.ts.
 */
import { chunks, chunksBy } from '../core/chunks.js';
import { settle, wholeThenEach } from '../core/batching.js';
import type { SessionRecord } from '../core/records.js';
import type {
  AbandonOutcome,
  AbandonRef,
  AdoptOutcome,
  CancelArgs,
  CancelOutcome,
  CloseOutcome,
  ConsoleRevocation,
  ConsoleRevocationListener,
  EndArgs,
  EndOutcome,
  FinishJob,
  GrantJob,
  GrantOutcome,
  HeldOwner,
  LeaseKeeperOptions,
  LeaseOutcome,
  LeaseStore,
  LockName,
  MigrateItem,
  NewTask,
  OpenedSession,
  RevokeConsoleOutcome,
  RewriteOutcome,
  SessionLeaseKeeper,
  SettleArgs,
  Settled,
  StoredHolding,
  StoredOwner,
  StoredSession,
  StoredTask,
  StoreLimits,
  StoreSnapshot,
  StoreWatchListener,
  StoreLock,
  SubmitBatchOutcome,
  TaskDetail,
  TaskRef,
  TaskWrite,
} from '../store/port.js';
import { CoordinatorError, EtcdError } from '../errors.js';
import type { BackendStatus, KvBackend, TxnOptions } from './backend.js';
import { ConsoleRevocationStore } from './console-revocation-store.js';
import { sessionIdOf, type KeyLayout } from './keys.js';
import { DEFAULT_READ_BUDGET, Kv, type KvObserver, type ReadBudget } from './kv.js';
import { EtcdReads } from './reads.js';
import { watchStore } from './store-watch.js';
import { grantOwners, MAX_GRANT_PAYLOAD_BYTES, MAX_GRANTS_PER_TXN, undoGrant } from './transactions/grant-txns.js';
import { acquireLock } from './transactions/lock-txns.js';
import { distinctFinishes, finishAttempts, MAX_FINISHES_PER_TXN } from './transactions/lease-txns.js';
import {
  adoptSession,
  closeSession,
  createSession,
  endBatches,
  endSession,
  endSessions,
  MAX_END_SESSION_OWNERS,
  maxEndSettlements,
} from './transactions/session-txns.js';
import {
  cancelTask,
  MAX_MIGRATE_BYTES_PER_TXN,
  MAX_PURGES_PER_TXN,
  MAX_SUBMIT_BYTES_PER_TXN,
  MAX_SUBMITS_PER_TXN,
  migrateOpsOf,
  migrateTasks,
  purgeTasks,
  retryTask,
  settleLostAttempt,
  submitTasks,
} from './transactions/task-txns.js';

export interface KvLeaseStoreOptions {
  readonly observer?: KvObserver;
  /** How large one read may be (ETCD_PAGE_BYTES). */
  readonly budget?: ReadBudget;
}

export class KvLeaseStore implements LeaseStore {
  readonly backend: KvBackend;
  readonly keys: KeyLayout;
  readonly kv: Kv;
  readonly #reads: EtcdReads;
  readonly #console: ConsoleRevocationStore;
  readonly limits: StoreLimits = {
    maxEndSessionOwners: MAX_END_SESSION_OWNERS,
    maxEndSettlements,
    maxSubmitsPerCall: MAX_SUBMITS_PER_TXN,
    maxSubmitBytesPerCall: MAX_SUBMIT_BYTES_PER_TXN,
    maxPurgesPerTxn: MAX_PURGES_PER_TXN,
  };

  constructor(backend: KvBackend, keys: KeyLayout, options: KvLeaseStoreOptions = {}) {
    this.backend = backend;
    this.keys = keys;
    this.kv = new Kv(backend, options.observer ?? {}, options.budget ?? DEFAULT_READ_BUDGET);
    this.#reads = new EtcdReads(this.kv, keys);
    this.#console = new ConsoleRevocationStore(backend, this.kv, keys);
  }

  // --- sessions -----------------------------------------------------------------------------------

  async openSession(record: SessionRecord, leaseTtlSeconds: number): Promise<OpenedSession> {
    const leaseId = await this.backend.grantLease(leaseTtlSeconds);
    const sessionId = sessionIdOf(leaseId);
    let modRevision: bigint | undefined;
    try {
      modRevision = await createSession(this.kv, this.keys, { sessionId, leaseId, record });
    } catch (err) {
      await this.backend.revokeLease(leaseId).catch(() => undefined);
      throw err;
    }
    if (modRevision === undefined) {
      await this.backend.revokeLease(leaseId).catch(() => undefined);
      throw new CoordinatorError('INTERNAL', `session key for fresh lease ${sessionId} already exists`);
    }
    return { sessionId, leaseId, modRevision };
  }

  session(sessionId: string): Promise<StoredSession | undefined> {
    return this.#reads.session(sessionId);
  }

  sessionHoldings(sessionId: string): Promise<{ session: StoredSession | undefined; held: HeldOwner[] }> {
    return this.#reads.sessionHoldings(sessionId);
  }

  adoptSession(session: StoredSession, record: SessionRecord): Promise<AdoptOutcome> {
    return adoptSession(this.kv, this.keys, {
      sessionId: session.sessionId,
      leaseId: session.leaseId,
      seenModRevision: session.modRevision,
      record,
    });
  }

  endSession(args: EndArgs): Promise<EndOutcome> {
    return endSession(this.kv, this.keys, args);
  }

  /**
   * Up to 16 sessions per txn (MAX_ENDS_PER_TXN), each judged on its own (a nested txn each, see
   * endSession): an expiry wave ends in a few txns instead of one per session. A session whose
   * lists do not fit a batch, or that names an owner key another session of the batch names (an
   * index that lagged: both could settle that owner's task, and etcd refuses a request that puts a
   * key twice), goes in a txn of its own.
   * A thrown txn fails every session of it (the outcome is unknown): nothing is re-sent here.
   */
  async endSessions(batch: readonly EndArgs[]): Promise<Settled<EndOutcome>[]> {
    const groups = endBatches(batch);
    const run = async (group: readonly number[]): Promise<[number, Settled<EndOutcome>][]> => {
      const args = group.map((i) => batch[i] as EndArgs);
      const all = await settle(() => endSessions(this.kv, this.keys, args));
      return group.map((i, at) => [i, all.ok ? { ok: true, value: all.value[at] as EndOutcome } : all]);
    };
    const out = new Array<Settled<EndOutcome>>(batch.length);
    for (const [i, settled] of (await Promise.all(groups.map(run))).flat()) out[i] = settled;
    return out;
  }

  closeSession(args: {
    readonly sessionId: string;
    readonly leaseId: string;
    readonly knownModRevision: bigint;
    readonly record: SessionRecord;
  }): Promise<CloseOutcome> {
    return closeSession(this.kv, this.keys, args);
  }

  revokeLease(leaseId: string): Promise<void> {
    return this.backend.revokeLease(leaseId);
  }

  leaseKeeper(options: LeaseKeeperOptions): SessionLeaseKeeper {
    return this.backend.leaseKeeper(options);
  }

  // --- grants -------------------------------------------------------------------------------------

  /**
   * Up to 32 jobs and {@link MAX_GRANT_PAYLOAD_BYTES} of payloads per txn (the reply carries them).
   * Each job of a txn is judged on its own (a nested txn each, see grantOwners): one txn tells
   * every job its outcome, and a job that lost its race costs the others nothing.
   */
  async grant(jobs: readonly GrantJob[], options?: TxnOptions): Promise<Settled<GrantOutcome>[]> {
    const chunk = async (batch: readonly GrantJob[]): Promise<Settled<GrantOutcome>[]> => {
      const all = await settle(() => grantOwners(this.kv, this.keys, batch, options));
      if (!all.ok) return batch.map(() => all);
      return all.value.map((res) => ({
        ok: true,
        value: res.kind === 'granted' ? { kind: 'granted', token: res.token, payloadJson: res.payload } : res,
      }));
    };
    const batches = chunksBy(jobs, MAX_GRANTS_PER_TXN, MAX_GRANT_PAYLOAD_BYTES, (j) => j.next.payloadBytes);
    return (await Promise.all(batches.map((b) => chunk(b)))).flat();
  }

  abandonGrant(ref: AbandonRef): Promise<AbandonOutcome> {
    return undoGrant(this.kv, this.keys, ref);
  }

  holding(sessionId: string, requestId: string): Promise<StoredHolding | undefined> {
    return this.#reads.holding(sessionId, requestId);
  }

  // --- held leases --------------------------------------------------------------------------------

  /**
   * Jobs of distinct keys (resources, tasks, request ids; none of a layout-v1 record) go up to
   * {@link MAX_FINISHES_PER_TXN} per txn, and at most {@link MAX_GRANT_PAYLOAD_BYTES} of carried
   * grants' payloads, each judged on its own (finishAttempts); the others one txn each. A job whose
   * carried grant names a key of its own finish (or a layout-v1 record's job) goes without it: its
   * outcome then has no `carried`, and the caller takes that acquire on its own. A thrown txn
   * (outcome unknown) fails every job of it: nothing is re-sent blindly.
   */
  async finish(jobs: readonly FinishJob[]): Promise<Settled<LeaseOutcome>[]> {
    const fitted = jobs.map((j): FinishJob => {
      if (j.carried === undefined) return j;
      if (j.legacy === undefined && distinctFinishes(this.keys, [j])) return j;
      const { carried: _dropped, ...alone } = j;
      return alone;
    });
    const distinct = distinctFinishes(this.keys, fitted) && fitted.every((j) => j.legacy === undefined);
    const run = async (batch: readonly FinishJob[]): Promise<Settled<LeaseOutcome>[]> => {
      const all = await settle(() => finishAttempts(this.kv, this.keys, batch));
      return all.ok ? all.value.map((value) => ({ ok: true, value })) : batch.map(() => all);
    };
    const batches = distinct
      ? chunksBy(fitted, MAX_FINISHES_PER_TXN, MAX_GRANT_PAYLOAD_BYTES, (j) => j.carried?.next.payloadBytes ?? 0)
      : fitted.map((j) => [j]);
    return (await Promise.all(batches.map(run))).flat();
  }

  // --- tasks --------------------------------------------------------------------------------------

  submitTasks(tasks: readonly NewTask[]): Promise<SubmitBatchOutcome> {
    return submitTasks(this.kv, this.keys, tasks);
  }

  cancelTask(args: CancelArgs): Promise<CancelOutcome> {
    return cancelTask(this.kv, this.keys, args);
  }

  settleLostAttempt(args: SettleArgs): Promise<RewriteOutcome> {
    return settleLostAttempt(this.kv, this.keys, args);
  }

  retryTask(args: TaskWrite & { readonly modRevision: bigint }): Promise<RewriteOutcome> {
    return retryTask(this.kv, this.keys, args);
  }

  /** Up to 42 per txn, each judged on its own (a task changed since read is left, alone). */
  async purgeTasks(tasks: readonly TaskRef[]): Promise<string[]> {
    const purged: string[] = [];
    for (const batch of chunks(tasks, MAX_PURGES_PER_TXN)) {
      const done = await purgeTasks(this.kv, this.keys, batch);
      purged.push(...batch.filter((_, i) => done[i] === true).map((t) => t.taskId));
    }
    return purged;
  }

  /**
   * Batches of at most 128 ops and {@link MAX_MIGRATE_BYTES_PER_TXN} of payloads and histories;
   * when one fails (a record changed), one txn per record.
   */
  async migrateTasks(items: readonly MigrateItem[]): Promise<number> {
    let converted = 0;
    const weight = (t: MigrateItem) => t.legacy.payloadJson.length + JSON.stringify(t.legacy.history).length;
    for (const batch of chunksBy(items, 128, MAX_MIGRATE_BYTES_PER_TXN, weight)) {
      // Ops per txn: split further so that no success list passes etcd's 128.
      const fitted = chunksBy(batch, batch.length, 128, migrateOpsOf);
      for (const part of fitted) {
        converted += (await wholeThenEach(part, (items) => migrateTasks(this.kv, this.keys, items))).length;
      }
    }
    return converted;
  }

  async acquireLock(name: LockName, holder: string, ttlSeconds: number): Promise<StoreLock | undefined> {
    const leaseId = await this.backend.grantLease(ttlSeconds);
    try {
      const lock = await acquireLock(this.kv, this.keys, { name, holder, leaseId });
      if (lock === undefined) await this.backend.revokeLease(leaseId).catch(() => undefined);
      return lock;
    } catch (err) {
      await this.backend.revokeLease(leaseId).catch(() => undefined);
      throw err;
    }
  }

  /** Revoking the lock's lease deletes the key (it is on that lease alone). */
  async releaseLock(_name: LockName, lock: StoreLock): Promise<void> {
    await this.backend.revokeLease(lock.leaseId);
  }

  // --- reads --------------------------------------------------------------------------------------

  task(taskId: string): Promise<StoredTask | undefined> {
    return this.#reads.task(taskId);
  }

  owner(resource: string): Promise<StoredOwner | undefined> {
    return this.#reads.owner(resource);
  }

  ownerAndTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined }> {
    return this.#reads.ownerAndTask(resource, taskId);
  }

  grantedTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined; payloadJson: string | undefined }> {
    return this.#reads.grantedTask(resource, taskId);
  }

  tasksByIds(ids: readonly string[]): Promise<StoredTask[]> {
    return this.#reads.tasksByIds(ids);
  }

  taskDetail(taskId: string): Promise<TaskDetail | undefined> {
    return this.#reads.taskDetail(taskId);
  }

  taskPage(after: string | undefined, limit: number): Promise<{ tasks: StoredTask[]; more: boolean }> {
    return this.#reads.taskPage(after, limit);
  }

  snapshot(onTasks: (tasks: readonly StoredTask[]) => void): Promise<StoreSnapshot> {
    return this.#reads.snapshot(onTasks);
  }

  sessions(atRevision?: bigint): Promise<StoredSession[]> {
    return this.#reads.sessions(atRevision);
  }

  // --- watch ---------------------------------------------------------------------------------------

  /** Tasks, owners and sessions from `fromRevision`, grouped by revision (see store-watch.ts). */
  watch(fromRevision: bigint, listener: StoreWatchListener): Promise<{ cancel(): Promise<void> }> {
    return watchStore(this.backend, this.keys, fromRevision, listener);
  }

  // --- web console (console-revocation-store.ts) --------------------------------------------------

  revokeConsoleSession(revocation: ConsoleRevocation, ttlSeconds: number): Promise<RevokeConsoleOutcome> {
    return this.#console.revoke(revocation, ttlSeconds);
  }

  consoleRevocations(): Promise<{ revocations: ConsoleRevocation[]; revision: bigint }> {
    return this.#console.all();
  }

  watchConsoleRevocations(
    fromRevision: bigint,
    listener: ConsoleRevocationListener,
  ): Promise<{ cancel(): Promise<void> }> {
    return this.#console.watch(fromRevision, listener);
  }

  status(): Promise<BackendStatus> {
    return this.backend.status();
  }

  /** One small read: false only when etcd did not answer (a refusal is an answer). */
  async ping(): Promise<boolean> {
    try {
      await this.#reads.session('0');
      return true;
    } catch (err) {
      return err instanceof EtcdError && err.failure !== 'unavailable';
    }
  }

  close(): void {
    this.backend.close();
  }
}
