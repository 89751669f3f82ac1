/**
 * The hot frames of both directions checked by validators compiled from their own zod schemas
 * (see ../validate.ts): worker -> coordinator (one per grant: acquire, release, complete,
 * heartbeat, renew) and coordinator -> worker (grant, none, completed, released, renewed,
 * heartbeat ack). A frame they accept is exactly what {@link WorkerMessageSchema} /
 * {@link CoordinatorMessageSchema} would return; anything else answers `undefined` and the caller
 * runs the schema, which decides and describes the problem. Each validator is compiled on its
 * first use, so a process pays only for the direction it reads (compiling all of them cost every
 * SDK worker's start ~16 % of its start-up CPU). `fast-decode.test.ts` holds the subset property
 * against the schemas with tables of bad values and generated frames.
 */
import { compileValidator } from '../validate.js';
import {
  AcquireSchema,
  CompletedSchema,
  CompleteSchema,
  GrantSchema,
  NoLeaseSchema,
  ReleasedSchema,
  ReleaseSchema,
  RenewedSchema,
  RenewSchema,
} from './lease.js';
import { HeartbeatAckSchema, HeartbeatSchema } from './session.js';
import type { CoordinatorMessage, WorkerMessage } from './worker-protocol.js';

type Check = (value: unknown) => boolean;

/** Validators by frame type, each compiled from its schema when first asked for. */
function lazyTable(
  schemas: Readonly<Record<string, Parameters<typeof compileValidator>[0]>>,
): (type: string) => Check | undefined {
  const compiled = new Map<string, Check>();
  return (type) => {
    let check = compiled.get(type);
    if (check === undefined && Object.hasOwn(schemas, type)) {
      const schema = schemas[type];
      if (schema === undefined) return undefined;
      check = compileValidator(schema);
      compiled.set(type, check);
    }
    return check;
  };
}

const WORKER_HOT = lazyTable({
  'lease.acquire': AcquireSchema,
  'lease.release': ReleaseSchema,
  'lease.renew': RenewSchema,
  'task.complete': CompleteSchema,
  heartbeat: HeartbeatSchema,
});

const COORDINATOR_HOT = lazyTable({
  'lease.granted': GrantSchema,
  'lease.none': NoLeaseSchema,
  'lease.renewed': RenewedSchema,
  'lease.released': ReleasedSchema,
  'task.completed': CompletedSchema,
  'heartbeat.ack': HeartbeatAckSchema,
});

function fast(raw: unknown, table: (type: string) => Check | undefined): boolean {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return false;
  const type = (raw as { type?: unknown }).type;
  const check = typeof type === 'string' ? table(type) : undefined;
  return check?.(raw) === true;
}

/**
 * A parsed worker frame as {@link WorkerMessageSchema} would return it, when it is one of the hot
 * kinds and certainly valid; otherwise `undefined`.
 */
export function fastWorkerMessage(raw: unknown): WorkerMessage | undefined {
  return fast(raw, WORKER_HOT) ? (raw as WorkerMessage) : undefined;
}

/**
 * A parsed coordinator frame as {@link CoordinatorMessageSchema} would return it, when it is one
 * of the hot kinds and certainly valid; otherwise `undefined`.
 */
export function fastCoordinatorMessage(raw: unknown): CoordinatorMessage | undefined {
  return fast(raw, COORDINATOR_HOT) ? (raw as CoordinatorMessage) : undefined;
}
