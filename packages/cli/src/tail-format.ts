/**
 * One line per event for `leasehold tail`: the coordinator's task events and the sink's decisions
 * and refusals, merged in arrival order. Problems are upper case (STALE_TOKEN, FENCE_CONFLICT,
 * RESULT_CONFLICT, FORBIDDEN, UNAUTHENTICATED, INVALID_MESSAGE, PAYLOAD_TOO_LARGE, RETRYING,
 * EXPIRED, FAILED), the normal flow lower case. Pure.
 */
import type { CoordinatorEvent, SinkEvent, TaskEvent } from '@leasehold/client';
import { formatDuration } from './durations.js';
import { describeError, paint } from './task-views.js';

const RED = '31';
const YELLOW = '33';
const GREEN = '32';
const DIM = '90';

export const clock = (ms: number): string => new Date(ms).toISOString().slice(11, 23);

function line(
  atMs: number,
  source: 'task' | 'sink',
  kind: string,
  text: string,
  colour: string | undefined,
  tty: boolean,
) {
  return `${clock(atMs)} ${source} ${paint(kind.padEnd(17), colour, tty)} ${text}`;
}

const attemptText = (e: TaskEvent) => `attempt ${e.attempts} of ${e.maxAttempts}`;

function nextText(e: TaskEvent): string {
  return e.notBeforeMs === undefined ? '' : `; next in ${formatDuration(Math.max(0, e.notBeforeMs - e.atMs))}`;
}

function taskLine(e: TaskEvent, tty: boolean): string {
  const where = `${e.taskId} on ${e.resource}`;
  switch (e.event) {
    case 'submitted': {
      const delay =
        e.notBeforeMs === undefined ? '' : ` (runs in ${formatDuration(Math.max(0, e.notBeforeMs - e.atMs))})`;
      return line(e.atMs, 'task', 'submitted', `${where}${delay}`, undefined, tty);
    }
    case 'granted':
      return line(
        e.atMs,
        'task',
        'granted',
        `${where} to ${e.workerId ?? '?'}, token ${e.token ?? '?'} (${attemptText(e)})`,
        undefined,
        tty,
      );
    case 'completed':
      return line(
        e.atMs,
        'task',
        'completed',
        `${where}: result ${e.result?.resultId ?? '?'} at token ${e.result?.token ?? e.token ?? '?'}`,
        GREEN,
        tty,
      );
    case 'retrying':
      return line(
        e.atMs,
        'task',
        'RETRYING',
        `${where}: ${describeError(e.error)} by ${e.workerId ?? '?'} (${attemptText(e)}${nextText(e)})`,
        YELLOW,
        tty,
      );
    case 'expired':
      return line(
        e.atMs,
        'task',
        'EXPIRED',
        `${where}: the lease of ${e.workerId ?? '?'} (token ${e.token ?? '?'}) ended without a result (${attemptText(e)}${nextText(e)})`,
        YELLOW,
        tty,
      );
    case 'failed':
      return line(
        e.atMs,
        'task',
        'FAILED',
        `${where} after ${e.attempts} attempt${e.attempts === 1 ? '' : 's'}: ${describeError(e.error)} — dead letter (leasehold retry ${e.taskId})`,
        RED,
        tty,
      );
    case 'released':
      return line(e.atMs, 'task', 'released', `${where} by ${e.workerId ?? '?'} (pending again)`, undefined, tty);
    case 'abandoned':
      return line(
        e.atMs,
        'task',
        'abandoned',
        `${where}: grant not delivered (the fence advance failed)${nextText(e)}`,
        YELLOW,
        tty,
      );
    case 'cancelled':
      return line(e.atMs, 'task', 'cancelled', where, DIM, tty);
    case 'retried':
      return line(e.atMs, 'task', 'retried', `${where}: pending again with a fresh budget`, undefined, tty);
  }
}

export function formatTaskEvent(event: CoordinatorEvent, nowMs: number, tty = false): string {
  if (event.type === 'reset') {
    return line(
      nowMs,
      'task',
      'RESET',
      `task events before revision ${event.revision} could not be replayed (${event.reason}); following from now`,
      RED,
      tty,
    );
  }
  return taskLine(event, tty);
}

const REFUSAL_TEXT: Readonly<Record<string, string>> = {
  UNAUTHENTICATED: 'missing or unknown credentials',
  FORBIDDEN: 'credentials do not allow this (a capability that does not verify, or a read-only key)',
  INVALID_MESSAGE: 'malformed request',
  PAYLOAD_TOO_LARGE: 'body over the limit',
};

const METHOD_OF: Readonly<Record<string, string>> = {
  '/v1/writes': 'write',
  '/v1/writes/batch': 'write',
  '/v1/fences/advance': 'advance',
  '/v1/fences/advance-batch': 'advance-batch',
};

/** A line for a sink event; undefined for what is noise in a tail (an advance to the same token). */
export function formatSinkEvent(event: SinkEvent, nowMs: number, tty = false): string | undefined {
  if (event.type === 'reset') {
    const text =
      event.reason === 'pruned'
        ? `decisions ${event.requested + 1}..${event.resumeAfter} were pruned by retention before they were shown`
        : `asked to resume after ${event.requested}, but the log ends at ${event.resumeAfter}`;
    return line(nowMs, 'sink', 'RESET', text, RED, tty);
  }
  if (event.type === 'refusal') {
    const what = [METHOD_OF[event.route] ?? event.route];
    if (event.resource !== undefined) what.push(event.resource);
    if (event.token !== undefined) what.push(`token ${event.token}`);
    if (event.workerId !== undefined) what.push(`by ${event.workerId}`);
    if (event.remote !== undefined) what.push(`from ${event.remote}`);
    const more = event.suppressed === undefined ? '' : ` (+${event.suppressed} more refusals not shown)`;
    return line(
      event.atMs,
      'sink',
      event.code,
      `${what.join(' ')}: ${REFUSAL_TEXT[event.code] ?? ''}${more}`,
      RED,
      tty,
    );
  }
  const d = event;
  const by = d.workerId === undefined ? '' : ` by ${d.workerId}`;
  switch (d.outcome) {
    case 'advanced':
      return line(
        d.atMs,
        'sink',
        'fence',
        `${d.resource} advanced to ${d.token} (was ${d.fenceBefore})`,
        undefined,
        tty,
      );
    case 'unchanged':
      return undefined;
    case 'written':
      return line(d.atMs, 'sink', 'write', `${d.resource} ${d.resultId ?? '?'}${by}, token ${d.token}`, undefined, tty);
    case 'replayed':
      return line(
        d.atMs,
        'sink',
        'replay',
        `${d.resource} ${d.resultId ?? '?'}${by}, token ${d.token} (same payload again)`,
        DIM,
        tty,
      );
    case 'STALE_TOKEN':
      return line(
        d.atMs,
        'sink',
        'STALE_TOKEN',
        d.kind === 'write'
          ? `${d.resource} write${by} with token ${d.token} refused: fence is ${d.fenceBefore} (a newer holder exists)`
          : `${d.resource} advance to ${d.token} refused: fence is ${d.fenceBefore}`,
        RED,
        tty,
      );
    case 'FENCE_CONFLICT':
      return line(
        d.atMs,
        'sink',
        'FENCE_CONFLICT',
        `${d.resource} write${by} with token ${d.token} refused: fence is ${d.fenceBefore} (no grant advanced to it)`,
        RED,
        tty,
      );
    case 'RESULT_CONFLICT':
      return line(
        d.atMs,
        'sink',
        'RESULT_CONFLICT',
        `${d.resource} write of ${d.resultId ?? '?'}${by} refused: stored before with another payload`,
        RED,
        tty,
      );
  }
}
