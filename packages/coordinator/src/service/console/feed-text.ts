/**
 * One line per event for the console's live stream (the same facts `leasehold tail` prints): task
 * changes from the store watch, decisions and refusals from the sink's stream. Pure.
 */
import type { SinkEvent, TaskEvent } from '@leasehold/protocol';
import type { ConsoleFeedItem } from '../../../ui/console-api.js';

const TASK_PROBLEMS = new Set(['expired', 'failed', 'retrying']);

/**
 * A task change as a feed line. `lost` is the attempt a grant follows when that one ended without a
 * result (expired): the grant is then a takeover, and says from whom.
 */
export function feedOfTask(
  event: TaskEvent,
  id: number,
  lost?: { readonly workerId: string; readonly token: string },
): ConsoleFeedItem {
  const by = event.workerId === undefined ? '' : ` by ${event.workerId}`;
  const tok = event.token === undefined ? '' : `, token ${event.token}`;
  const tries = `attempt ${event.attempts} of ${event.maxAttempts}`;
  const err = event.error === undefined ? '' : `: ${event.error.name}: ${event.error.message}`;
  let text: string;
  switch (event.event) {
    case 'granted':
      text =
        `${event.taskId} on ${event.resource} granted to ${event.workerId ?? '?'}${tok} (${tries})` +
        (lost === undefined ? '' : ` — TAKEOVER from ${lost.workerId} (token ${lost.token}), whose lease expired`);
      break;
    case 'expired':
      text = `${event.taskId} on ${event.resource}: lease of ${event.workerId ?? '?'}${tok} EXPIRED (${tries})`;
      break;
    case 'completed':
      text = `${event.taskId} on ${event.resource} completed${by}${tok}`;
      break;
    default:
      text = `${event.taskId} on ${event.resource} ${event.event}${by}${tok}${err}`;
  }
  return {
    id,
    atMs: event.atMs,
    source: 'task',
    kind: lost === undefined ? event.event : 'takeover',
    resource: event.resource,
    taskId: event.taskId,
    workerId: event.workerId ?? null,
    token: event.token ?? null,
    fence: null,
    stale: false,
    problem: TASK_PROBLEMS.has(event.event) || lost !== undefined,
    text,
  };
}

/** A sink event as a feed line (undefined for a stream reset, which is not news to an operator). */
export function feedOfSink(
  event: SinkEvent,
  id: number,
  holderOf: (resource: string, token: string) => string | undefined,
): ConsoleFeedItem | undefined {
  if (event.type === 'reset') return undefined;
  if (event.type === 'refusal') {
    const what = event.route === '/v1/writes' || event.route === '/v1/writes/batch' ? 'write' : 'advance';
    return {
      id,
      atMs: event.atMs,
      source: 'sink',
      kind: event.code,
      resource: event.resource ?? null,
      taskId: null,
      workerId: event.workerId ?? null,
      token: event.token ?? null,
      fence: null,
      stale: false,
      problem: true,
      text:
        `${event.code}: ${what}${event.resource === undefined ? '' : ` ${event.resource}`}` +
        `${event.token === undefined ? '' : ` token ${event.token}`}${event.workerId === undefined ? '' : ` by ${event.workerId}`}` +
        `${event.remote === undefined ? '' : ` from ${event.remote}`} refused before the store` +
        (event.suppressed === undefined ? '' : ` (+${event.suppressed} more not shown)`),
    };
  }
  const base = {
    id,
    atMs: event.atMs,
    source: 'sink' as const,
    resource: event.resource,
    taskId: null,
    workerId: event.workerId ?? null,
    token: event.token,
    fence: event.fenceBefore,
  };
  const by = event.workerId === undefined ? '' : ` by ${event.workerId}`;
  switch (event.outcome) {
    case 'advanced':
      return {
        ...base,
        kind: 'advance',
        stale: false,
        problem: false,
        text: `fence of ${event.resource} advanced to ${event.token} (was ${event.fenceBefore})`,
      };
    case 'unchanged':
      return {
        ...base,
        kind: 'advance',
        stale: false,
        problem: false,
        text: `fence of ${event.resource} already at ${event.fenceBefore} (advance to ${event.token})`,
      };
    case 'written':
    case 'replayed':
      return {
        ...base,
        kind: 'write',
        stale: false,
        problem: false,
        text: `write of ${event.resultId ?? '?'} on ${event.resource}${by}, token ${event.token}: ${event.outcome}`,
      };
    case 'STALE_TOKEN': {
      const newer = holderOf(event.resource, event.fenceBefore);
      return {
        ...base,
        kind: 'STALE_TOKEN',
        stale: true,
        problem: true,
        text:
          `STALE_TOKEN: ${event.kind} on ${event.resource}${by} with token ${event.token} refused: ` +
          `the fence is ${event.fenceBefore}${newer === undefined ? '' : ` (${newer}'s grant)`}, a newer holder exists`,
      };
    }
    case 'FENCE_CONFLICT':
      return {
        ...base,
        kind: 'FENCE_CONFLICT',
        stale: false,
        problem: true,
        text: `FENCE_CONFLICT: ${event.kind} on ${event.resource}${by} with token ${event.token} refused: the fence is ${event.fenceBefore} (no grant advanced to it)`,
      };
    case 'RESULT_CONFLICT':
      return {
        ...base,
        kind: 'RESULT_CONFLICT',
        stale: false,
        problem: true,
        text: `RESULT_CONFLICT: ${event.resultId ?? '?'} on ${event.resource}${by} refused: stored before with another payload`,
      };
  }
}
