/**
 * Hand-written checks of the hottest wire shapes, for the paths that see one per grant: each accepts
 * a SUBSET of what the zod schema accepts and returns exactly what the schema would return; for
 * anything else it answers `undefined` and the caller runs the schema, which decides and describes
 * the problem (so refusals keep their codes and messages). `fast-decode.test.ts` holds every
 * function to its schema with tables of bad values and generated frames.
 *
 * Rules mirrored (from ids.ts, token.ts, common.ts, session.ts, lease.ts):
 *   ids (resource, task, result, worker, request)  1-200 chars of [A-Za-z0-9._:/@-], not starting
 *                                                  with /, no // or ..
 *   token          positive decimal, no leading zeros, <= int64 max
 *   incarnation    1-64 chars of [A-Za-z0-9._-]
 *   message id     1-64 chars, any
 *   session id     1-16 chars of [0-9a-f]
 */
import { ID_MAX_LENGTH } from '../ids.js';
import { INT64_MAX } from '../token.js';
import type { Acquire, Complete, Release } from './lease.js';
import { MAX_ACQUIRE_WAIT_MS } from './lease.js';
import type { Heartbeat } from './session.js';
import type { WorkerMessage } from './worker-protocol.js';

const ID_PATTERN = /^[A-Za-z0-9._:@-][A-Za-z0-9._:/@-]*$/;
const TOKEN_PATTERN = /^[1-9][0-9]{0,18}$/;
const INT64_MAX_TEXT = INT64_MAX.toString(10);
const INCARNATION_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const SESSION_ID_PATTERN = /^[0-9a-f]{1,16}$/;

export function isIdText(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length >= 1 &&
    value.length <= ID_MAX_LENGTH &&
    ID_PATTERN.test(value) &&
    !value.includes('//') &&
    !value.includes('..')
  );
}

export function isTokenText(value: unknown): value is string {
  if (typeof value !== 'string' || !TOKEN_PATTERN.test(value)) return false;
  // No leading zeros: same length means lexical order is numeric order.
  return value.length < INT64_MAX_TEXT.length || value <= INT64_MAX_TEXT;
}

export function isIncarnationText(value: unknown): value is string {
  return typeof value === 'string' && INCARNATION_PATTERN.test(value);
}

function isMessageId(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= 64;
}

/** Own enumerable keys of `o` are exactly `required`, plus any of `optional`. */
function hasKeys(o: Record<string, unknown>, required: number, optional: readonly string[]): boolean {
  let n = Object.keys(o).length;
  for (const key of optional) if (Object.hasOwn(o, key)) n -= 1;
  return n === required;
}

function acquire(o: Record<string, unknown>): Acquire | undefined {
  const { id, requestId, taskId, waitMs } = o;
  if (!isMessageId(id) || !isIdText(requestId) || !hasKeys(o, 3, ['taskId', 'waitMs'])) return undefined;
  if (taskId !== undefined && !isIdText(taskId)) return undefined;
  if (
    waitMs !== undefined &&
    (typeof waitMs !== 'number' || !Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_ACQUIRE_WAIT_MS)
  ) {
    return undefined;
  }
  if (Object.hasOwn(o, 'taskId') && taskId === undefined) return undefined;
  if (Object.hasOwn(o, 'waitMs') && waitMs === undefined) return undefined;
  return {
    type: 'lease.acquire',
    id,
    requestId,
    ...(taskId === undefined ? {} : { taskId }),
    ...(waitMs === undefined ? {} : { waitMs }),
  };
}

function heldLease(o: Record<string, unknown>): { resource: string; token: string; incarnation: string } | undefined {
  const { resource, token, incarnation } = o;
  return isIdText(resource) && isTokenText(token) && isIncarnationText(incarnation)
    ? { resource, token, incarnation }
    : undefined;
}

function release(o: Record<string, unknown>): Release | undefined {
  const { id, reason } = o;
  const held = heldLease(o);
  if (!isMessageId(id) || held === undefined || !hasKeys(o, 5, ['reason'])) return undefined;
  if (Object.hasOwn(o, 'reason') && (typeof reason !== 'string' || reason.length > 500)) return undefined;
  return { type: 'lease.release', id, ...held, ...(typeof reason === 'string' ? { reason } : {}) };
}

function complete(o: Record<string, unknown>): Complete | undefined {
  const { id, taskId, resultId } = o;
  const held = heldLease(o);
  if (!isMessageId(id) || !isIdText(taskId) || !isIdText(resultId) || held === undefined || !hasKeys(o, 7, [])) {
    return undefined;
  }
  return { type: 'task.complete', id, taskId, resultId, ...held };
}

function heartbeat(o: Record<string, unknown>): Heartbeat | undefined {
  const { id, sessionId } = o;
  if (!isMessageId(id) || typeof sessionId !== 'string' || !SESSION_ID_PATTERN.test(sessionId)) return undefined;
  return hasKeys(o, 3, []) ? { type: 'heartbeat', id, sessionId } : undefined;
}

/**
 * A parsed worker frame as {@link WorkerMessageSchema} would return it, when it is one of the hot
 * kinds (acquire, release, complete, heartbeat) and certainly valid; otherwise `undefined`.
 */
export function fastWorkerMessage(raw: unknown): WorkerMessage | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const o = raw as Record<string, unknown>;
  switch (o['type']) {
    case 'lease.acquire':
      return acquire(o);
    case 'lease.release':
      return release(o);
    case 'task.complete':
      return complete(o);
    case 'heartbeat':
      return heartbeat(o);
    default:
      return undefined;
  }
}
