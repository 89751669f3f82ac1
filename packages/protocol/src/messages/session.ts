/** Session messages: hello/welcome, heartbeats, session expiry. */
import { z } from 'zod';
import { IncarnationSchema, MAX_SESSION_QUEUES, QueueNameSchema, WorkerIdSchema } from '../ids.js';
import { MessageIdSchema } from './common.js';

export const SessionIdSchema = z
  .string()
  .regex(/^[0-9a-f]{1,16}$/)
  .describe('Session id: the etcd lease id in hex.');

/** worker -> coordinator, first frame on every connection. */
export const HelloSchema = z.object({
  type: z.literal('hello'),
  id: MessageIdSchema,
  protocolVersion: z.number().int().positive(),
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  /** Resume this session (after a reconnect or a coordinator failover) instead of opening a new one. */
  resumeSessionId: SessionIdSchema.optional(),
  /** How many leases the worker will hold at once. */
  capacity: z.number().int().min(1).max(10_000).default(1),
  /**
   * The queues this session serves (at most {@link MAX_SESSION_QUEUES}; repeats count once). Absent
   * (a worker of an older SDK): `default` only.
   */
  queues: z.array(QueueNameSchema).min(1).max(MAX_SESSION_QUEUES).optional(),
});
export type Hello = z.infer<typeof HelloSchema>;

/** coordinator -> worker, reply to hello. */
export const WelcomeSchema = z.object({
  type: z.literal('welcome'),
  inReplyTo: MessageIdSchema,
  protocolVersion: z.number().int().positive(),
  sessionId: SessionIdSchema,
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  coordinatorId: z.string(),
  /** True when an existing, still-live session was resumed. */
  resumed: z.boolean(),
  /** Session TTL. The worker's lease is valid for at most ttlMs after the coordinator last accepted a heartbeat. */
  ttlMs: z.number().int().positive(),
  heartbeatIntervalMs: z.number().int().positive(),
  /**
   * Optional protocol features this coordinator takes, beyond its version (e.g. `complete.next`).
   * Absent (an older coordinator): none. A worker uses a feature only when it is named here.
   */
  features: z.array(z.string().min(1).max(64)).max(32).optional(),
});
export type Welcome = z.infer<typeof WelcomeSchema>;

/** worker -> coordinator. */
export const HeartbeatSchema = z.object({
  type: z.literal('heartbeat'),
  id: MessageIdSchema,
  sessionId: SessionIdSchema,
});
export type Heartbeat = z.infer<typeof HeartbeatSchema>;

/** coordinator -> worker. `ttlMs` is the time left, counted from when the coordinator accepted the heartbeat. */
export const HeartbeatAckSchema = z.object({
  type: z.literal('heartbeat.ack'),
  inReplyTo: MessageIdSchema,
  sessionId: SessionIdSchema,
  ttlMs: z.number().int().positive(),
});
export type HeartbeatAck = z.infer<typeof HeartbeatAckSchema>;

/**
 * The protocol feature a coordinator names in `welcome.features` when it takes {@link DrainSchema}.
 */
export const FEATURE_SESSION_DRAIN = 'session.drain';

/**
 * worker -> coordinator: the worker is closing. Every acquire of this session that is waiting (a
 * long poll) stops waiting: it selects once more and answers at once, `lease.none` when nothing is
 * grantable; acquires of the session that arrive later (one a closing `task.complete` carries) do
 * not wait either. Nothing else changes: leases held stay held until released, completed or the
 * session ends. Answered with {@link DrainingSchema}. Only to a coordinator whose
 * `welcome.features` names {@link FEATURE_SESSION_DRAIN} (an older one refuses the frame).
 */
export const DrainSchema = z.object({
  type: z.literal('session.drain'),
  id: MessageIdSchema,
  sessionId: SessionIdSchema,
});
export type Drain = z.infer<typeof DrainSchema>;

/** coordinator -> worker: the session is draining (its waiting acquires were answered). */
export const DrainingSchema = z.object({
  type: z.literal('session.draining'),
  inReplyTo: MessageIdSchema,
  sessionId: SessionIdSchema,
});
export type Draining = z.infer<typeof DrainingSchema>;

/** coordinator -> worker push: the session is gone, and with it every lease it held. */
export const SessionExpiredSchema = z.object({
  type: z.literal('session.expired'),
  sessionId: SessionIdSchema,
  reason: z.enum(['deadline', 'revoked', 'unknown-session', 'incarnation-mismatch']),
});
export type SessionExpired = z.infer<typeof SessionExpiredSchema>;
