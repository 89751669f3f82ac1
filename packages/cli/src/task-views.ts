/**
 * What `leasehold tasks` and `leasehold task ID` print: a table of tasks (with `--state failed`,
 * the dead letters: their attempts and last error) and the full view of one task with its attempt
 * history. Pure: the time is passed in, colour only when asked.
 */
import type { AttemptView, RetryPolicy, TaskError, TaskRetention, TaskView } from '@leasehold/protocol';
import { formatDuration } from './durations.js';

const COLOUR: Readonly<Record<string, string>> = {
  leased: '33',
  pending: '36',
  delayed: '34',
  completed: '32',
  failed: '31',
  cancelled: '90',
};

export function paint(text: string, colour: string | undefined, tty: boolean): string {
  return tty && colour !== undefined ? `\u001b[${colour}m${text}\u001b[0m` : text;
}

export function describeError(error: TaskError | undefined, max = 80): string {
  if (error === undefined) return '';
  const text = `${error.name}: ${error.message}`.replaceAll(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const ago = (ms: number) => `${formatDuration(Math.max(0, ms))} ago`;

/** The WHEN column: what the state's time means. */
function when(task: TaskView, nowMs: number): string {
  switch (task.state) {
    case 'delayed':
      return task.notBeforeMs === undefined ? '' : `runs in ${formatDuration(Math.max(0, task.notBeforeMs - nowMs))}`;
    case 'leased':
      return task.owner === undefined ? '' : `held by ${task.owner.workerId}`;
    case 'completed':
    case 'failed':
    case 'cancelled':
      return task.endedAtMs === undefined ? '' : `ended ${ago(nowMs - task.endedAtMs)}`;
    case 'pending':
      return task.createdAtMs === undefined ? '' : `created ${ago(nowMs - task.createdAtMs)}`;
  }
}

/**
 * Aligned columns (the last one not padded); header bold and `colour(row, column)` applied after
 * padding when `tty`, so escape codes never count as width.
 */
export function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  tty: boolean,
  colour: (row: number, column: number) => string | undefined = () => undefined,
): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[], row: number) =>
    cells
      .map((c, i) => paint(i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0), colour(row, i), tty))
      .join('  ')
      .trimEnd();
  const head = line(header, -1);
  return [tty ? `\u001b[1m${head}\u001b[0m` : head, ...rows.map(line)];
}

export interface TaskTableOptions {
  readonly nowMs: number;
  readonly tty: boolean;
  /** The state asked for (footer hints for failed tasks). */
  readonly state?: string | undefined;
}

export function renderTaskTable(tasks: readonly TaskView[], options: TaskTableOptions): string {
  if (tasks.length === 0) return options.state === undefined ? 'no tasks' : `no ${options.state} tasks`;
  const rows = tasks.map((t) => [
    t.taskId,
    t.resource,
    t.state,
    String(t.priority),
    `${t.attempts}/${t.retry.maxAttempts}`,
    when(t, options.nowMs),
    describeError(t.lastError, 60),
  ]);
  const out = table(['TASK', 'RESOURCE', 'STATE', 'PRI', 'TRIES', 'WHEN', 'LAST ERROR'], rows, options.tty, (r, c) =>
    c === 2 ? COLOUR[tasks[r]?.state ?? ''] : undefined,
  );
  const counts = new Map<string, number>();
  for (const t of tasks) counts.set(t.state, (counts.get(t.state) ?? 0) + 1);
  out.push(
    '',
    `${tasks.length} task${tasks.length === 1 ? '' : 's'}: ${[...counts].map(([s, n]) => `${n} ${s}`).join(', ')}`,
  );
  if (options.state === 'failed') {
    out.push(
      'retry one: leasehold retry ID   details: leasehold task ID   clean up: leasehold purge --state failed --older-than 7d',
    );
  }
  return out.join('\n');
}

export function describePolicy(policy: RetryPolicy): string {
  const b = policy.backoff;
  const growth = b.multiplier === 1 ? 'constant' : `×${b.multiplier}`;
  const parts = [
    `${policy.maxAttempts} attempt${policy.maxAttempts === 1 ? '' : 's'}`,
    `backoff ${formatDuration(b.initialMs)} ${growth} up to ${formatDuration(b.maxMs)}`,
    `jitter ${Math.round(b.jitter * 100)}%`,
  ];
  if (policy.nonRetryable.length > 0) parts.push(`non-retryable: ${policy.nonRetryable.join(', ')}`);
  return parts.join(', ');
}

const stamp = (ms: number, nowMs: number) => `${new Date(ms).toISOString()} (${ago(nowMs - ms)})`;

function historyRows(history: readonly AttemptView[]): string[][] {
  return history.map((h) => [
    String(h.attempt),
    h.outcome,
    h.workerId,
    h.token,
    new Date(h.startedAtMs).toISOString(),
    formatDuration(h.endedAtMs - h.startedAtMs),
    describeError(h.error, 70),
  ]);
}

/** A task's own retention, e.g. `completed 1h, failed kept` (by state, as submitted). */
function describeRetention(retention: TaskRetention): string {
  const parts = (['completed', 'failed', 'cancelled'] as const).flatMap((state) => {
    const keep = retention[state];
    if (keep === undefined) return [];
    return [`${state} ${keep === null ? 'kept until purged' : `removed ${formatDuration(keep)} after the end`}`];
  });
  return parts.join(', ');
}

export function renderTaskDetail(task: TaskView, options: { readonly nowMs: number; readonly tty: boolean }): string {
  const { nowMs, tty } = options;
  const fields: [string, string][] = [
    ['task', task.taskId],
    ['resource', task.resource],
    ['queue', task.queue],
    ['state', `${paint(task.state, COLOUR[task.state], tty)} (last event: ${task.lastEvent})`],
    ['priority', String(task.priority)],
    ['attempts', `${task.attempts} of ${task.retry.maxAttempts}`],
    ['retry', describePolicy(task.retry)],
  ];
  if (task.createdAtMs !== undefined) fields.push(['created', stamp(task.createdAtMs, nowMs)]);
  if (task.notBeforeMs !== undefined) {
    const wait = task.notBeforeMs - nowMs;
    fields.push([
      'not before',
      `${new Date(task.notBeforeMs).toISOString()} (${wait > 0 ? `in ${formatDuration(wait)}` : 'due'})`,
    ]);
  }
  if (task.endedAtMs !== undefined) fields.push(['ended', stamp(task.endedAtMs, nowMs)]);
  if (task.owner !== undefined) {
    const o = task.owner;
    fields.push(['owner', `${o.workerId} (session ${o.sessionId}, token ${o.token}, attempt ${o.attempt})`]);
  }
  if (task.result !== undefined) fields.push(['result', `${task.result.resultId} at token ${task.result.token}`]);
  if (task.lastError !== undefined) fields.push(['last error', describeError(task.lastError, 200)]);
  fields.push(['payload', `${JSON.stringify(task.payload ?? null)} (${task.payloadBytes} bytes)`]);
  if (task.retention !== undefined) fields.push(['retention', describeRetention(task.retention)]);
  const width = Math.max(...fields.map(([k]) => k.length));
  const out = fields.map(([k, v]) => `${k.padEnd(width)}  ${v}`);
  out.push('');
  const history = task.history ?? (task.lastAttempt === undefined ? [] : [task.lastAttempt]);
  if (history.length === 0) out.push('history: no attempt has ended yet');
  else {
    out.push(`history (last ${history.length}, oldest first):`);
    const rows = historyRows(history);
    out.push(...table(['#', 'OUTCOME', 'WORKER', 'TOKEN', 'STARTED', 'TOOK', 'ERROR'], rows, tty).map((l) => `  ${l}`));
  }
  if (task.state === 'failed') out.push('', `run it again: leasehold retry ${task.taskId}`);
  return out.join('\n');
}
