/** The two directions of the worker <-> coordinator WebSocket protocol as discriminated unions. */
import { z } from 'zod';
import { ErrorMessageSchema } from './common.js';
import {
  AcquireSchema,
  CompletedSchema,
  CompleteSchema,
  FailedSchema,
  FailSchema,
  GrantSchema,
  LeaseRevokedSchema,
  NoLeaseSchema,
  ReleasedSchema,
  ReleaseSchema,
  RenewedSchema,
  RenewSchema,
} from './lease.js';
import {
  DrainingSchema,
  DrainSchema,
  HeartbeatAckSchema,
  HeartbeatSchema,
  HelloSchema,
  SessionExpiredSchema,
  WelcomeSchema,
} from './session.js';

export const WorkerMessageSchema = z.discriminatedUnion('type', [
  HelloSchema,
  HeartbeatSchema,
  AcquireSchema,
  RenewSchema,
  ReleaseSchema,
  CompleteSchema,
  FailSchema,
  DrainSchema,
]);
export type WorkerMessage = z.infer<typeof WorkerMessageSchema>;

export const CoordinatorMessageSchema = z.discriminatedUnion('type', [
  WelcomeSchema,
  HeartbeatAckSchema,
  GrantSchema,
  NoLeaseSchema,
  RenewedSchema,
  ReleasedSchema,
  CompletedSchema,
  FailedSchema,
  LeaseRevokedSchema,
  SessionExpiredSchema,
  DrainingSchema,
  ErrorMessageSchema,
]);
export type CoordinatorMessage = z.infer<typeof CoordinatorMessageSchema>;

export const WORKER_MESSAGE_TYPES = WorkerMessageSchema.options.map((o) => o.shape.type.value);
export const COORDINATOR_MESSAGE_TYPES = CoordinatorMessageSchema.options.map((o) => o.shape.type.value);
