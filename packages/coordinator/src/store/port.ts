/**
 * The LeaseStore port: everything the services need of the coordination store, with typed
 * outcomes. Nothing above this port sees an etcd type, a raw key-value or a revision string:
 * revisions are bigint, records are parsed, and each atomic operation says what happened
 * (`granted | replay | sessionMoved | raced`, …) instead of handing back what its compares saw.
 *
 * The implementation is {@link KvLeaseStore} (`etcd/lease-store.ts`): every operation is one of
 * the documented transactions in `etcd/transactions/`, run on a KvBackend — a real etcd, or the
 * in-memory etcd of the unit tests (`MemoryEtcd` of `@leasehold/testing`). `testing/store-contract.ts` runs one suite
 * against both.
 */
import type { JsonValue } from '@leasehold/protocol';
import type { HoldingRecord, OwnerRecord, SessionRecord } from '../core/records.js';
import type { AttemptRecord, LegacyParts, TaskRecord } from '../core/task-record.js';
import type { BackendStatus, LeaseKeeper, LeaseKeeperOptions } from '../etcd/backend.js';

export interface StoredTask {
  /** The record (layout v2; a v1 record as its v2 shape, see `legacy`). */
  readonly record: TaskRecord;
  /** The stored value as read (layout v2: the record's JSON, kept by the index for the grant). */
  readonly value: string;
  /**
   * Set for a record of layout v1 (payload and history inside): every write computed from it moves
   * them to `inputs/` and `history/` in the same txn.
   */
  readonly legacy?: LegacyParts;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
}

/** A task with what a task view reads on demand. */
export interface TaskDetail {
  readonly task: StoredTask;
  /** undefined: `inputs/<t>` is missing (a broken invariant, shown as such). */
  readonly payload: JsonValue | undefined;
  /** Oldest first, at most MAX_TASK_HISTORY. */
  readonly history: readonly AttemptRecord[];
}

/** A task to create: its record and its payload's JSON (`inputs/<t>`). */
export interface NewTask {
  readonly record: TaskRecord;
  readonly payloadJson: string;
}

/** A write of a task record computed from `prev` (as read), with the moves of a v1 record. */
export interface TaskWrite {
  readonly next: TaskRecord;
  /** The record was of layout v1: these parts move to their own keys in the same txn. */
  readonly legacy?: LegacyParts | undefined;
}

export interface StoredOwner {
  readonly resource: string;
  readonly record: OwnerRecord;
  /** The owner key's create_revision: the fencing token. */
  readonly token: bigint;
  readonly modRevision: bigint;
  readonly leaseId: string;
}

export interface StoredSession {
  readonly sessionId: string;
  readonly record: SessionRecord;
  readonly modRevision: bigint;
  readonly leaseId: string;
}

export interface StoredHolding {
  readonly record: HoldingRecord;
  /** create_revision of the holding = the token of the grant made for its request id. */
  readonly token: bigint;
}

export interface HeldOwner {
  readonly resource: string;
  readonly token: bigint;
}

/** Outcome of an operation that can throw: a thrown error means the outcome is unknown. */
export type Settled<O> = { readonly ok: true; readonly value: O } | { readonly ok: false; readonly error: unknown };

// --- sessions ------------------------------------------------------------------------------------

export interface OpenedSession {
  readonly sessionId: string;
  readonly leaseId: string;
  /** The session key's mod_revision: this coordinator's proof that it serves the session. */
  readonly modRevision: bigint;
}

export type AdoptOutcome =
  | { readonly kind: 'adopted'; readonly modRevision: bigint }
  /** The session key changed since it was read (a peer adopted it, or it ended): read again. */
  | { readonly kind: 'raced' };

export type EndOutcome =
  | { readonly kind: 'ended'; readonly revision: bigint }
  /** The session key is gone: already ended (by a peer, the lease, or an earlier attempt). */
  | { readonly kind: 'gone' }
  /** A peer serves the session now: do not end it. */
  | { readonly kind: 'moved' }
  /** Still ours, but the holdings differ from those given (a grant landed, the index lagged). */
  | { readonly kind: 'changed' };

export type CloseOutcome =
  { readonly kind: 'closed'; readonly modRevision: bigint } | { readonly kind: 'gone' } | { readonly kind: 'moved' };

// --- grants --------------------------------------------------------------------------------------

export interface GrantJob {
  readonly sessionId: string;
  readonly leaseId: string;
  /** sessions/<sid> mod_revision this coordinator knows: it still serves the session. */
  readonly sessionModRevision: bigint;
  readonly requestId: string;
  /** The task as read, and the mod_revision it was read at: it is still pending and unchanged. */
  readonly task: TaskRecord;
  readonly taskModRevision: bigint;
  /** The task record the grant writes (the lifecycle's `granted`: one more attempt, opened). */
  readonly next: TaskRecord;
  readonly owner: OwnerRecord;
}

export type GrantOutcome =
  /**
   * The owner key was created; its create_revision is the token. `payloadJson`: `inputs/<t>` as
   * the grant txn read it (undefined when missing: a broken invariant, the grant is abandoned).
   */
  | { readonly kind: 'granted'; readonly token: bigint; readonly payloadJson: string | undefined }
  /** This request id already holds a grant (a retry after a lost reply): that one. */
  | { readonly kind: 'replay'; readonly holding: StoredHolding }
  /** The session is gone or served by a peer. */
  | { readonly kind: 'sessionMoved' }
  /** The resource is owned or the task changed since it was read (a stale index): select again. */
  | { readonly kind: 'raced'; readonly revision: bigint };

export interface GrantRef {
  readonly sessionId: string;
  readonly requestId: string;
  readonly resource: string;
  readonly token: bigint;
}

/** A grant to undo, with the task record that closes its attempt (the lifecycle's `abandoned`). */
export interface AbandonRef extends GrantRef {
  /** Absent for a replayed grant (its task record is not at hand): the task is left as it is. */
  readonly next?: TaskRecord;
}

export type AbandonOutcome =
  /** Owner key and holding removed, and the attempt closed in the task record. */
  | 'closed'
  /** Owner key and holding removed (the task record had changed: left as it is). */
  | 'removed'
  /** The owner key was already gone; the stale holding was removed. */
  | 'forgotten'
  /** Neither was there any more. */
  | 'gone';

// --- held leases ---------------------------------------------------------------------------------

export interface HolderProof {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly resource: string;
  readonly token: bigint;
  /** The request id the grant was made for (its holding key). */
  readonly requestId: string;
}

/** End a held lease: complete, fail or release, as the `next` record of its task says. */
export interface FinishJob extends HolderProof, TaskWrite {
  /** The task's mod_revision the next record was computed from. */
  readonly taskModRevision: bigint;
  /**
   * A grant made in the same txn, only if this finish is (a completion's carried acquire): for
   * another resource, task and request id. The session never holds it without having ended this
   * lease, so the two count once against its capacity.
   */
  readonly carried?: GrantJob | undefined;
}

export type LeaseOutcome =
  /**
   * `carried`: the carried grant's outcome, as {@link LeaseStore.grant} tells it (granted at the
   * finish's revision). Absent when the job had none, or when the store sent the finish without it
   * (its keys clash with the finish's own): then it was not tried.
   */
  | { readonly kind: 'done'; readonly revision: bigint; readonly carried?: GrantOutcome }
  /** The proof failed: the caller no longer holds that token (or the task changed). */
  | { readonly kind: 'notHolder' };

// --- tasks ---------------------------------------------------------------------------------------

export type SubmitBatchOutcome =
  | { readonly kind: 'created'; readonly revision: bigint }
  /** Nothing was created; per task (in order), the existing one or undefined when absent. */
  | { readonly kind: 'exists'; readonly existing: readonly (StoredTask | 'unreadable' | undefined)[] };

export interface CancelArgs extends TaskWrite {
  readonly task: TaskRecord;
  readonly taskModRevision: bigint;
  /** The cancelled record (the lifecycle's `cancelled`). */
  readonly next: TaskRecord;
  /** The holder when the task is leased. */
  readonly owner: { readonly sessionId: string; readonly token: bigint; readonly requestId: string } | undefined;
}

export type CancelOutcome = { readonly kind: 'cancelled'; readonly revision: bigint } | { readonly kind: 'raced' };

/** Settle an attempt whose lease ended without an outcome: `token` is its grant's. */
export interface SettleArgs extends TaskWrite {
  readonly token: bigint;
  /** The record as read (whether the write closes an attempt is judged against it). */
  readonly prev: TaskRecord;
}

/** End a session at its deadline (`settle`: lost attempts recorded in the same txn). */
export interface EndArgs {
  readonly sessionId: string;
  readonly knownModRevision: bigint;
  readonly held: readonly HeldOwner[];
  /** The holdings come from an index complete up to this revision. */
  readonly knownUpTo?: bigint;
  /**
   * The open attempts of held owner keys (`token` = the owner key's), settled by the same txn;
   * layout v2 records only (no `legacy`), at most `maxEndSettlements(held.length)`.
   */
  readonly settle?: readonly SettleArgs[];
}

/** A record of layout v1 to convert (its mod_revision as read). */
export interface MigrateItem {
  readonly modRevision: bigint;
  readonly record: TaskRecord;
  readonly legacy: LegacyParts;
}

export type LockName = 'retention' | 'migration';

/** A short lock in the store (the retention sweeper's, the layout converter's), on a lease of its own. */
export interface StoreLock {
  readonly leaseId: string;
  /** The lock key's create_revision: only this holder's release deletes it. */
  readonly revision: bigint;
}

export type RewriteOutcome = { readonly kind: 'rewritten'; readonly revision: bigint } | { readonly kind: 'raced' };

export interface TaskRef {
  readonly taskId: string;
  readonly modRevision: bigint;
}

// --- web console ---------------------------------------------------------------------------------

/** A console login ended by logout; refused until `expiresAtMs`, when its cookie expires anyway. */
export interface ConsoleRevocation {
  readonly loginId: string;
  readonly expiresAtMs: number;
}

export type RevokeConsoleOutcome =
  { readonly kind: 'revoked'; readonly revision: bigint } | { readonly kind: 'already' };

export interface ConsoleRevocationListener {
  /** Revocations recorded (by any coordinator), in revision order. */
  onRevoked(revocations: readonly ConsoleRevocation[]): void;
  /** The watch is over (compacted, cancelled, failed): read them all again. */
  onError(err: unknown): void;
}

/** What the console's logout needs of the store: record a revocation, read and watch them all. */
export interface ConsoleRevocationStore {
  /** Record `loginId` as revoked; its key lives `ttlSeconds` (until the cookie expires). */
  revokeConsoleSession(revocation: ConsoleRevocation, ttlSeconds: number): Promise<RevokeConsoleOutcome>;
  /** Every revocation recorded, and the revision they were read at. */
  consoleRevocations(): Promise<{ revocations: ConsoleRevocation[]; revision: bigint }>;
  /** Revocations recorded from `fromRevision` on. */
  watchConsoleRevocations(
    fromRevision: bigint,
    listener: ConsoleRevocationListener,
  ): Promise<{ cancel(): Promise<void> }>;
}

// --- watch ---------------------------------------------------------------------------------------

export type StoreEvent =
  | { readonly kind: 'task'; readonly taskId: string; readonly task: StoredTask | undefined }
  | { readonly kind: 'owner'; readonly resource: string; readonly owner: StoredOwner | undefined }
  | { readonly kind: 'session'; readonly sessionId: string; readonly session: StoredSession | undefined };

export interface StoreWatchListener {
  /** The events of one revision (one transaction or one lease expiry). */
  onRevision(revision: bigint, events: readonly StoreEvent[]): void;
  /** Everything up to `revision` has been delivered. */
  onProgress(revision: bigint): void;
  /** The watch is over (compacted, cancelled, failed): rebuild from a snapshot. */
  onError(err: unknown): void;
  onDisconnected?(err: unknown): void;
}

export interface StoreSnapshot {
  readonly owners: readonly StoredOwner[];
  readonly revision: bigint;
}

/** Keeps the session leases alive: the backend's keeper, as the port names it. */
export type { LeaseKeeperOptions, LeaseKeeper as SessionLeaseKeeper } from '../etcd/backend.js';

/** Limits of one atomic operation, from the store's own (etcd: 128 ops per txn). */
export interface StoreLimits {
  /** endSession takes at most this many owner keys; more: closeSession + revoke. */
  readonly maxEndSessionOwners: number;
  /** How many lost attempts an endSession of `owners` owner keys may settle in the same txn. */
  readonly maxEndSettlements: (owners: number) => number;
  /** submitTasks takes at most this many tasks / bytes of records and payloads per call. */
  readonly maxSubmitsPerCall: number;
  readonly maxSubmitBytesPerCall: number;
  /** purgeTasks deletes at most this many per txn (the store splits bigger calls). */
  readonly maxPurgesPerTxn: number;
}

export interface LeaseStore extends ConsoleRevocationStore {
  readonly limits: StoreLimits;

  // sessions
  /** A fresh lease of `leaseTtlSeconds` and its session key; undone if the key cannot be created. */
  openSession(record: SessionRecord, leaseTtlSeconds: number): Promise<OpenedSession>;
  session(sessionId: string): Promise<StoredSession | undefined>;
  /** The session and the owner keys it holds, at one revision. */
  sessionHoldings(sessionId: string): Promise<{ session: StoredSession | undefined; held: HeldOwner[] }>;
  adoptSession(session: StoredSession, record: SessionRecord): Promise<AdoptOutcome>;
  endSession(args: EndArgs): Promise<EndOutcome>;
  /**
   * {@link endSession} of several sessions, each judged on its own (one outcome each, in order), in
   * as few txns as etcd's limits allow; a txn that threw fails each of its sessions.
   */
  endSessions(batch: readonly EndArgs[]): Promise<Settled<EndOutcome>[]>;
  closeSession(args: {
    readonly sessionId: string;
    readonly leaseId: string;
    readonly knownModRevision: bigint;
    readonly record: SessionRecord;
  }): Promise<CloseOutcome>;
  /** Revoke a session's lease (its remaining keys go at one revision). Idempotent. */
  revokeLease(leaseId: string): Promise<void>;
  leaseKeeper(options: LeaseKeeperOptions): LeaseKeeper;

  // grants
  /**
   * Many grants, batched into as few atomic steps as the store allows; one outcome per job.
   * `urgent` (takeovers): sent at once, not held back to share a request with other work.
   */
  grant(jobs: readonly GrantJob[], options?: { readonly urgent?: boolean }): Promise<Settled<GrantOutcome>[]>;
  /** Undo a grant that will never be sent (its fence advance failed), closing its attempt. */
  abandonGrant(ref: AbandonRef): Promise<AbandonOutcome>;
  holding(sessionId: string, requestId: string): Promise<StoredHolding | undefined>;

  // held leases
  /** End held leases (complete, fail, release), batched; one outcome per job. */
  finish(jobs: readonly FinishJob[]): Promise<Settled<LeaseOutcome>[]>;

  // tasks
  submitTasks(tasks: readonly NewTask[]): Promise<SubmitBatchOutcome>;
  cancelTask(args: CancelArgs): Promise<CancelOutcome>;
  /** Record an attempt whose lease ended without an outcome (any coordinator; one lands). */
  settleLostAttempt(args: SettleArgs): Promise<RewriteOutcome>;
  /** A failed task, read at `modRevision`, pending again. */
  retryTask(args: TaskWrite & { readonly modRevision: bigint }): Promise<RewriteOutcome>;
  /**
   * Delete ended tasks as read — record, payload and history; the ids deleted (a task changed
   * since it was read, e.g. retried, is skipped).
   */
  purgeTasks(tasks: readonly TaskRef[]): Promise<string[]>;
  /** Convert records of layout v1 (unchanged since read) to layout v2; how many were converted. */
  migrateTasks(items: readonly MigrateItem[]): Promise<number>;
  /** Take the lock `name` for `ttlSeconds` (undefined: someone holds it). */
  acquireLock(name: LockName, holder: string, ttlSeconds: number): Promise<StoreLock | undefined>;
  /** Give the lock back (only if still this holder's). */
  releaseLock(name: LockName, lock: StoreLock): Promise<void>;

  // reads
  task(taskId: string): Promise<StoredTask | undefined>;
  owner(resource: string): Promise<StoredOwner | undefined>;
  ownerAndTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined }>;
  /** The owner key, the task and its payload's JSON, at one revision (a replayed grant). */
  grantedTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined; payloadJson: string | undefined }>;
  /** Tasks by id, absent ones left out (read in replies bounded by the receive limit). */
  tasksByIds(ids: readonly string[]): Promise<StoredTask[]>;
  /** A task with its payload and history (a task view). */
  taskDetail(taskId: string): Promise<TaskDetail | undefined>;
  /** Up to `limit` tasks after `after` in id order, read in byte-bounded pages. */
  taskPage(after: string | undefined, limit: number): Promise<{ tasks: StoredTask[]; more: boolean }>;
  /**
   * Every task and owner at one revision, in byte-bounded pages: tasks handed to `onTasks` as read,
   * owners and the revision returned.
   */
  snapshot(onTasks: (tasks: readonly StoredTask[]) => void): Promise<StoreSnapshot>;
  /** Every session key, at `atRevision` when given (the web console's session list). */
  sessions(atRevision?: bigint): Promise<StoredSession[]>;

  // watch
  /** Watch tasks, owners and sessions from `fromRevision`. */
  watch(fromRevision: bigint, listener: StoreWatchListener): Promise<{ cancel(): Promise<void> }>;

  /** The store's size and quota alarm (the etcd db size metrics). */
  status(): Promise<BackendStatus>;

  /**
   * The store answers (readiness, etcd health): true also when it answers with a refusal (NOSPACE,
   * permission): only unavailability is false.
   */
  ping(): Promise<boolean>;
  close(): void;
}
