/**
 * The task commands of `leasehold`: submit (with scheduling and retry options), tasks, task,
 * cancel, retry, purge. Each takes the parsed options and the admin client and prints through
 * `out`; refusals surface as the client's LeaseholdErrors (exit 1 in main), usage problems as a
 * ConfigError (exit 2).
 */
import {
  ConfigError,
  DEFAULT_QUEUE,
  QUEUE_NAME_MAX_LENGTH,
  QueueNameSchema,
  TaskStateSchema,
  TerminalTaskStateSchema,
  type JsonValue,
} from '@leasehold/protocol';
import type { LeaseholdClient, SubmitOptions, TaskView } from '@leasehold/client';
import { formatDuration, parseDuration } from './durations.js';
import { describePolicy, renderTaskDetail, renderTaskTable } from './task-views.js';

export interface CommandContext {
  /** Options by env name (see OPTIONS in leasehold-main.ts). */
  readonly raw: Readonly<Record<string, string | undefined>>;
  /** Positional arguments after the command word. */
  readonly args: readonly string[];
  /** Every value of a repeatable flag, from argv. */
  readonly repeated: (flag: string) => string[];
  readonly admin: LeaseholdClient;
  readonly out: (text: string) => void;
  readonly tty: boolean;
  readonly nowMs: () => number;
}

function intOption(raw: CommandContext['raw'], key: string, flag: string, problems: string[]): number | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) {
    problems.push(`--${flag} must be a non-negative integer`);
    return undefined;
  }
  return Number(text);
}

function durationOption(raw: CommandContext['raw'], key: string, flag: string, problems: string[]): number | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === undefined) problems.push(`--${flag} must be a duration such as 500ms, 30s, 5m, 2h or 7d`);
  return ms;
}

/** `--keep-<state>`: a duration (removed that long after the end) or `forever` (kept until purged). */
function keepOption(
  raw: CommandContext['raw'],
  key: string,
  flag: string,
  problems: string[],
): number | null | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  if (text === 'forever') return null;
  const ms = parseDuration(text);
  if (ms === undefined) problems.push(`--${flag} must be a duration such as 10m, 1h or 7d, or forever`);
  return ms;
}

function oneId(ctx: CommandContext, command: string): string {
  const [id, ...extra] = ctx.args;
  if (id === undefined || extra.length > 0) throw new ConfigError([`usage: leasehold ${command} TASK_ID`]);
  return id;
}

/** The submit request from the flags (pure; exported for tests). */
export function submitRequestOf(raw: CommandContext['raw'], nonRetryable: readonly string[]): SubmitOptions {
  const problems: string[] = [];
  const taskId = raw.TASK_ID;
  const resource = raw.RESOURCE;
  if (taskId === undefined || resource === undefined) problems.push('submit needs --task-id and --resource');
  let payload: unknown = {};
  try {
    payload = JSON.parse(raw.PAYLOAD ?? '{}');
  } catch {
    problems.push('--payload must be JSON');
  }
  const queue = raw.QUEUE;
  if (queue !== undefined && !QueueNameSchema.safeParse(queue).success) {
    problems.push(`--queue: not a valid queue name (1-${QUEUE_NAME_MAX_LENGTH} chars of [A-Za-z0-9._:/@-]): ${queue}`);
  }
  const priority = intOption(raw, 'PRIORITY', 'priority', problems);
  if (priority !== undefined && priority > 9) problems.push('--priority must be 0..9');
  const delayMs = durationOption(raw, 'DELAY', 'delay', problems);
  let runAt: string | undefined;
  if (raw.RUN_AT !== undefined) {
    const at = new Date(raw.RUN_AT);
    if (Number.isNaN(at.getTime())) problems.push('--run-at must be a date and time, e.g. 2026-12-24T18:00:00Z');
    else runAt = at.toISOString();
  }
  if (delayMs !== undefined && runAt !== undefined) problems.push('give --delay or --run-at, not both');
  const maxAttempts = intOption(raw, 'MAX_ATTEMPTS', 'max-attempts', problems);
  if (maxAttempts === 0) problems.push('--max-attempts must be at least 1');
  const initialMs = durationOption(raw, 'BACKOFF_INITIAL', 'backoff-initial', problems);
  const maxMs = durationOption(raw, 'BACKOFF_MAX', 'backoff-max', problems);
  const retention = {
    completed: keepOption(raw, 'KEEP_COMPLETED', 'keep-completed', problems),
    failed: keepOption(raw, 'KEEP_FAILED', 'keep-failed', problems),
    cancelled: keepOption(raw, 'KEEP_CANCELLED', 'keep-cancelled', problems),
  };
  const ownRetention = Object.fromEntries(Object.entries(retention).filter(([, v]) => v !== undefined));
  const names = nonRetryable
    .flatMap((n) => n.split(','))
    .map((n) => n.trim())
    .filter((n) => n.length > 0);
  if (problems.length > 0 || taskId === undefined || resource === undefined) throw new ConfigError(problems);
  const backoff = {
    ...(initialMs === undefined ? {} : { initialMs }),
    ...(maxMs === undefined ? {} : { maxMs }),
  };
  const retry = {
    ...(maxAttempts === undefined ? {} : { maxAttempts }),
    ...(Object.keys(backoff).length === 0 ? {} : { backoff }),
    ...(names.length === 0 ? {} : { nonRetryable: names }),
  };
  return {
    taskId,
    resource,
    payload: payload as JsonValue,
    ...(queue === undefined ? {} : { queue }),
    ...(priority === undefined ? {} : { priority }),
    ...(delayMs === undefined ? {} : { delayMs }),
    ...(runAt === undefined ? {} : { runAt }),
    ...(Object.keys(retry).length === 0 ? {} : { retry }),
    ...(Object.keys(ownRetention).length === 0 ? {} : { retention: ownRetention }),
  };
}

export async function submitCommand(ctx: CommandContext): Promise<number> {
  const request = submitRequestOf(ctx.raw, ctx.repeated('non-retryable'));
  const { created, task } = await ctx.admin.submit(request);
  if (ctx.raw.JSON === 'true') {
    ctx.out(JSON.stringify(task, null, 2));
    return 0;
  }
  const when =
    task.state === 'delayed' && task.notBeforeMs !== undefined
      ? `, runs in ${formatDuration(Math.max(0, task.notBeforeMs - ctx.nowMs()))}`
      : '';
  const head = created
    ? `submitted ${task.taskId} on ${task.resource}${task.queue === DEFAULT_QUEUE ? '' : ` (queue ${task.queue})`}: ${task.state}${when}`
    : `${task.taskId} was submitted before with this definition (its first options apply): ${task.state}${when}`;
  ctx.out(`${head}\n  priority ${task.priority}; ${describePolicy(task.retry)}`);
  return 0;
}

export async function tasksCommand(ctx: CommandContext): Promise<number> {
  const stateText = ctx.raw.STATE;
  const state = stateText === undefined ? undefined : TaskStateSchema.safeParse(stateText);
  if (state !== undefined && !state.success) {
    throw new ConfigError([`--state must be one of ${TaskStateSchema.options.join(', ')}`]);
  }
  if (ctx.args.length > 0) throw new ConfigError(['usage: leasehold tasks [--state STATE] [--json]']);
  const tasks = await ctx.admin.tasks(state?.data);
  if (ctx.raw.JSON === 'true') ctx.out(JSON.stringify(tasks, null, 2));
  else ctx.out(renderTaskTable(tasks, { nowMs: ctx.nowMs(), tty: ctx.tty, state: state?.data }));
  return 0;
}

export async function taskCommand(ctx: CommandContext): Promise<number> {
  const id = oneId(ctx, 'task');
  const task = await ctx.admin.get(id);
  if (task === undefined) {
    ctx.out(`no task ${id}`);
    return 1;
  }
  ctx.out(
    ctx.raw.JSON === 'true'
      ? JSON.stringify(task, null, 2)
      : renderTaskDetail(task, { nowMs: ctx.nowMs(), tty: ctx.tty }),
  );
  return 0;
}

function cancelNote(task: TaskView): string {
  const last = task.lastAttempt;
  if (last?.outcome !== 'cancelled') return '';
  return `\n  the open attempt of ${last.workerId} (token ${last.token}) was ended and the sink's fence moved past it: its late write will be refused`;
}

export async function cancelCommand(ctx: CommandContext): Promise<number> {
  const task = await ctx.admin.cancel(oneId(ctx, 'cancel'));
  ctx.out(ctx.raw.JSON === 'true' ? JSON.stringify(task, null, 2) : `cancelled ${task.taskId}${cancelNote(task)}`);
  return 0;
}

export async function retryCommand(ctx: CommandContext): Promise<number> {
  const task = await ctx.admin.retry(oneId(ctx, 'retry'));
  ctx.out(
    ctx.raw.JSON === 'true'
      ? JSON.stringify(task, null, 2)
      : `${task.taskId} is ${task.state} again with a fresh budget of ${task.retry.maxAttempts} attempt${task.retry.maxAttempts === 1 ? '' : 's'}`,
  );
  return 0;
}

export async function purgeCommand(ctx: CommandContext): Promise<number> {
  const problems: string[] = [];
  const state = TerminalTaskStateSchema.safeParse(ctx.raw.STATE);
  if (!state.success) problems.push('purge needs --state completed, failed or cancelled');
  if (ctx.raw.OLDER_THAN === undefined) problems.push('purge needs --older-than, e.g. --older-than 7d');
  const olderThanMs = durationOption(ctx.raw, 'OLDER_THAN', 'older-than', problems);
  const limit = intOption(ctx.raw, 'LIMIT', 'limit', problems);
  if (limit === 0) problems.push('--limit must be at least 1');
  if (ctx.args.length > 0) problems.push('usage: leasehold purge --state STATE --older-than DURATION [--limit N]');
  if (problems.length > 0 || !state.success || olderThanMs === undefined) throw new ConfigError(problems);
  const purged = await ctx.admin.purgeAll({
    state: state.data,
    olderThanMs,
    ...(limit === undefined ? {} : { limit }),
  });
  ctx.out(
    ctx.raw.JSON === 'true'
      ? JSON.stringify({ purged })
      : `purged ${purged} ${state.data} task${purged === 1 ? '' : 's'} that ended more than ${formatDuration(olderThanMs)} ago`,
  );
  return 0;
}

/** Every value of `--flag V` / `--flag=V` in argv (for repeatable flags). */
export function repeatedFlag(argv: readonly string[], flag: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') break;
    if (arg === `--${flag}`) {
      const value = argv[i + 1];
      if (value !== undefined && !value.startsWith('--')) out.push(value);
      i += 1;
    } else if (arg.startsWith(`--${flag}=`)) out.push(arg.slice(flag.length + 3));
  }
  return out;
}
