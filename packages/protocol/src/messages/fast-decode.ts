/**
 * The hot worker frames (one per grant: acquire, release, complete, heartbeat, renew) checked by
 * validators compiled from their own zod schemas (see ../validate.ts): a frame they accept is
 * exactly what {@link WorkerMessageSchema} would return; anything else answers `undefined` and the
 * caller runs the schema, which decides and describes the problem. `fast-decode.test.ts` holds the
 * subset property against the schema with tables of bad values and generated frames.
 */
import { compileValidator } from '../validate.js';
import { AcquireSchema, CompleteSchema, ReleaseSchema, RenewSchema } from './lease.js';
import { HeartbeatSchema } from './session.js';
import type { WorkerMessage } from './worker-protocol.js';

const HOT: Readonly<Record<string, (value: unknown) => boolean>> = {
  'lease.acquire': compileValidator(AcquireSchema),
  'lease.release': compileValidator(ReleaseSchema),
  'lease.renew': compileValidator(RenewSchema),
  'task.complete': compileValidator(CompleteSchema),
  heartbeat: compileValidator(HeartbeatSchema),
};

/**
 * A parsed worker frame as {@link WorkerMessageSchema} would return it, when it is one of the hot
 * kinds and certainly valid; otherwise `undefined`.
 */
export function fastWorkerMessage(raw: unknown): WorkerMessage | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const type = (raw as { type?: unknown }).type;
  const check = typeof type === 'string' ? HOT[type] : undefined;
  return check?.(raw) === true ? (raw as WorkerMessage) : undefined;
}
