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
import type { z } from 'zod';
import { compileValidator } from '../validate.js';
import {
  CoordinatorMessageSchema,
  WorkerMessageSchema,
  type CoordinatorMessage,
  type WorkerMessage,
} from './worker-protocol.js';

type Check = (value: unknown) => boolean;

/** Validators by frame type, each compiled from its union member when first asked for. */
function lazyTable(
  options: readonly (z.ZodObject & { shape: { type: z.ZodLiteral<string> } })[],
  hot: readonly string[],
): (type: string) => Check | undefined {
  const schemas = new Map(options.filter((o) => hot.includes(o.shape.type.value)).map((o) => [o.shape.type.value, o]));
  const compiled = new Map<string, Check>();
  return (type) => {
    let check = compiled.get(type);
    if (check === undefined) {
      const schema = schemas.get(type);
      if (schema === undefined) return undefined;
      check = compileValidator(schema);
      compiled.set(type, check);
    }
    return check;
  };
}

const WORKER_HOT = lazyTable(WorkerMessageSchema.options, [
  'lease.acquire',
  'lease.release',
  'lease.renew',
  'task.complete',
  'heartbeat',
]);

const COORDINATOR_HOT = lazyTable(CoordinatorMessageSchema.options, [
  'lease.granted',
  'lease.none',
  'lease.renewed',
  'lease.released',
  'task.completed',
  'heartbeat.ack',
]);

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
