/** Lease messages: acquire/grant, renew, release, complete, revocation. */
import { z } from 'zod';
import {
  IncarnationSchema,
  MAX_SESSION_QUEUES,
  QueueNameSchema,
  RequestIdSchema,
  ResourceIdSchema,
  ResultIdSchema,
  TaskIdSchema,
} from '../ids.js';
import { TokenSchema } from '../token.js';
import { JsonValueSchema, MessageIdSchema, TraceparentSchema, TaskOnResource } from './common.js';

/** Upper bound of `lease.acquire.waitMs`. */
export const MAX_ACQUIRE_WAIT_MS = 30_000;

/**
 * worker -> coordinator: ask for a pending task (or a named one). Idempotent by `requestId`: a retry
 * with the same request id returns the grant recorded for it, never a second one. With `waitMs`
 * (a long poll), a coordinator that has nothing to grant holds the request up to that long and
 * answers as soon as a task becomes grantable; `lease.none` only when the wait ran out. Peers that
 * predate `waitMs` ignore it and answer at once.
 */
export const AcquireSchema = z.object({
  type: z.literal('lease.acquire'),
  id: MessageIdSchema,
  requestId: RequestIdSchema,
  taskId: TaskIdSchema.optional(),
  waitMs: z.number().int().nonnegative().max(MAX_ACQUIRE_WAIT_MS).optional(),
  /**
   * Serve only these of the session's queues for this acquire (each must be one the hello named:
   * else INVALID_MESSAGE). Absent: every queue of the session.
   */
  queues: z.array(QueueNameSchema).min(1).max(MAX_SESSION_QUEUES).optional(),
});
export type Acquire = z.infer<typeof AcquireSchema>;

/**
 * The protocol feature a coordinator names in `welcome.features` when it takes an acquire carried
 * in `task.complete.next` ({@link CarriedAcquireSchema}).
 */
export const FEATURE_COMPLETE_NEXT = 'complete.next';

/**
 * An acquire carried in a `task.complete` frame (`next`): the slot that completes asks for its next
 * task in the same frame instead of a `lease.acquire` of its own after the reply. The coordinator
 * takes it once the completion is answered (completed or refused), exactly as a `lease.acquire`
 * with these fields (`id` its message id) arriving then: same capacity, same idempotency by
 * `requestId`, same long poll. Only to a coordinator whose `welcome.features` names
 * {@link FEATURE_COMPLETE_NEXT} (an older one would strip it and never answer).
 */
export const CarriedAcquireSchema = AcquireSchema.omit({ type: true });
export type CarriedAcquire = z.infer<typeof CarriedAcquireSchema>;

/**
 * coordinator -> worker: the grant. Sent only after the sink's fence for `resource` was durably
 * advanced to `token`.
 */
export const GrantSchema = z.object({
  type: z.literal('lease.granted'),
  inReplyTo: MessageIdSchema,
  requestId: RequestIdSchema,
  ...TaskOnResource,
  token: TokenSchema,
  /** Write capability for the sink: the coordinator's Ed25519 signature over (resource, token, workerId, incarnation). */
  capability: z.string().min(1).max(512),
  ttlMs: z.number().int().positive(),
  payload: JsonValueSchema,
  /** How many times this task has been granted (1 for the first). */
  attempt: z.number().int().positive(),
  /** The grant's span (`leasehold.lease.grant`): the worker's handler span is its child. */
  traceparent: TraceparentSchema.optional(),
});
export type Grant = z.infer<typeof GrantSchema>;

/** coordinator -> worker: no task can be granted now. */
export const NoLeaseSchema = z.object({
  type: z.literal('lease.none'),
  inReplyTo: MessageIdSchema,
  requestId: RequestIdSchema,
  retryAfterMs: z.number().int().nonnegative(),
});
export type NoLease = z.infer<typeof NoLeaseSchema>;

const HeldLease = {
  resource: ResourceIdSchema,
  token: TokenSchema,
  incarnation: IncarnationSchema,
};

/** The lease a coordinator reply is about (after `inReplyTo`). */
const LeaseReply = {
  inReplyTo: MessageIdSchema,
  resource: ResourceIdSchema,
  token: TokenSchema,
};

/** The task and lease a coordinator reply is about (after `inReplyTo`). */
const TaskReply = {
  inReplyTo: MessageIdSchema,
  ...TaskOnResource,
  token: TokenSchema,
};

/** worker -> coordinator: renew one lease; must match owner incarnation and token while the lease is valid. */
export const RenewSchema = z.object({ type: z.literal('lease.renew'), id: MessageIdSchema, ...HeldLease });
export type Renew = z.infer<typeof RenewSchema>;

export const RenewedSchema = z.object({
  type: z.literal('lease.renewed'),
  ...LeaseReply,
  ttlMs: z.number().int().positive(),
});
export type Renewed = z.infer<typeof RenewedSchema>;

/** worker -> coordinator: give the lease up without a result (the task goes back to pending). */
export const ReleaseSchema = z.object({
  type: z.literal('lease.release'),
  id: MessageIdSchema,
  ...HeldLease,
  reason: z.string().max(500).optional(),
  /** The worker's handler span (`leasehold.task.handle`). */
  traceparent: TraceparentSchema.optional(),
});
export type Release = z.infer<typeof ReleaseSchema>;

export const ReleasedSchema = z.object({ type: z.literal('lease.released'), ...LeaseReply });
export type Released = z.infer<typeof ReleasedSchema>;

/**
 * worker -> coordinator: the task's result was accepted by the sink under `resultId`; free the
 * resource. `noResult`: the handler wrote nothing to the sink (side effect only, or its own fenced
 * transaction): the task completes, and readers are told not to look for a result.
 */
export const CompleteSchema = z.object({
  type: z.literal('task.complete'),
  id: MessageIdSchema,
  taskId: TaskIdSchema,
  resultId: ResultIdSchema,
  noResult: z.literal(true).optional(),
  ...HeldLease,
  /** The worker's handler span (`leasehold.task.handle`). */
  traceparent: TraceparentSchema.optional(),
  /** The slot's next acquire, taken once this completion is answered ({@link CarriedAcquireSchema}). */
  next: CarriedAcquireSchema.optional(),
});
export type Complete = z.infer<typeof CompleteSchema>;

export const CompletedSchema = z.object({ type: z.literal('task.completed'), ...TaskReply });
export type Completed = z.infer<typeof CompletedSchema>;

/** Why an attempt failed, as the worker reports it (the handler's error). */
export const TaskFailureSchema = z.strictObject({
  /** The error's class name (`Error.name`): matched against the task's non-retryable names. */
  name: z.string().min(1).max(200),
  message: z.string().max(2_000),
  /** false: fail the task now, whatever attempts are left (the SDK's NonRetryableError). */
  retryable: z.boolean(),
});
export type TaskFailure = z.infer<typeof TaskFailureSchema>;

/**
 * worker -> coordinator: the handler failed. The lease ends (the resource is free), and the task is
 * either pending again after its retry policy's backoff, or failed (attempts used up, or the error
 * is not retryable). Only the holder may report it: the same holder proof as `task.complete`.
 */
export const FailSchema = z.object({
  type: z.literal('task.fail'),
  id: MessageIdSchema,
  taskId: TaskIdSchema,
  ...HeldLease,
  error: TaskFailureSchema,
  /** The worker's handler span (`leasehold.task.handle`). */
  traceparent: TraceparentSchema.optional(),
});
export type Fail = z.infer<typeof FailSchema>;

export const FailedSchema = z.object({
  type: z.literal('task.failed'),
  ...TaskReply,
  /** retrying: pending again from `notBeforeMs` (epoch ms); failed: terminal. */
  outcome: z.enum(['retrying', 'failed']),
  notBeforeMs: z.number().int().nonnegative().optional(),
});
export type Failed = z.infer<typeof FailedSchema>;

/** coordinator -> worker push: this lease is no longer the worker's (expired, cancelled, taken over). */
export const LeaseRevokedSchema = z.object({
  type: z.literal('lease.revoked'),
  resource: ResourceIdSchema,
  token: TokenSchema,
  reason: z.enum(['expired', 'cancelled', 'taken-over', 'session-expired']),
});
export type LeaseRevoked = z.infer<typeof LeaseRevokedSchema>;
