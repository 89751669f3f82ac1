/**
 * `leasehold status`: one row per resource, its latest task (a table a person reads at a glance,
 * or `--json`); `--all` shows every task of each resource, latest first. (`leasehold tail` is in
 * tail.ts.)
 *
 * The TOKEN column is the token of that row's task (its live grant, else its latest one); FENCE
 * is the sink's fence of the resource, and when another task's grant set it, that task is named
 * beside it (`66 by task-b`) — so a fence is never shown next to a token it has nothing to do with.
 * QUEUE is the task's queue; the summary counts the rows' tasks per queue by state.
 */
import type { SinkClient } from '@leasehold/sink-client';
import type { LeaseholdClient, ResourceOwnerView, TaskView } from '@leasehold/client';
import { taskStateRank } from '@leasehold/protocol';

export interface StatusRow {
  readonly resource: string;
  readonly task: string;
  /** The task's queue (`default` for tasks submitted without one). */
  readonly queue: string;
  readonly state: string;
  readonly owner: string;
  /** The token of this task's live grant, else of its latest grant ('' if never granted). */
  readonly token: string;
  /** The sink's fence of the resource ('?' if the sink did not answer). */
  readonly fence: string;
  /** The task whose grant set the fence, when it is not this row's task (undefined if unknown). */
  readonly fenceSetBy: string | undefined;
  readonly leftMs: number | null;
  readonly attempts: number;
}

/** The ended attempts a view carries: its history (a task view), else its last attempt (a list item). */
function endedOf(task: TaskView): readonly { readonly token: string; readonly endedAtMs: number }[] {
  return task.history ?? (task.lastAttempt === undefined ? [] : [task.lastAttempt]);
}

/** Every token a task was granted (live grant, stored result, ended attempts), as bigints. */
function tokensOf(task: TaskView): bigint[] {
  const out = endedOf(task).map((h) => BigInt(h.token));
  if (task.owner !== undefined) out.push(BigInt(task.owner.token));
  if (task.result !== undefined) out.push(BigInt(task.result.token));
  return out;
}

/** The token of the task's live grant, else its latest (greatest: tokens are etcd revisions). */
export function latestToken(task: TaskView): bigint | undefined {
  if (task.owner !== undefined) return BigInt(task.owner.token);
  return tokensOf(task).reduce<bigint | undefined>((max, t) => (max === undefined || t > max ? t : max), undefined);
}

/** When the task last changed, as far as the view tells (epoch ms). */
function lastActivityMs(task: TaskView): number {
  return Math.max(
    task.createdAtMs ?? 0,
    task.endedAtMs ?? 0,
    ...endedOf(task).map((h) => h.endedAtMs),
    task.owner === undefined ? 0 : Number.MAX_SAFE_INTEGER,
  );
}

/**
 * Latest first: the task holding the resource, then the one that changed last (ties: the later
 * token, then the later task id). Never the alphabetical order of task ids.
 */
export function compareLatest(a: TaskView, b: TaskView): number {
  const byActivity = lastActivityMs(b) - lastActivityMs(a);
  if (byActivity !== 0) return byActivity;
  const ta = latestToken(a) ?? -1n;
  const tb = latestToken(b) ?? -1n;
  if (ta !== tb) return tb > ta ? 1 : -1;
  return b.taskId.localeCompare(a.taskId);
}

/** Tasks grouped by resource, each group latest first. */
export function tasksByResource(tasks: readonly TaskView[]): Map<string, TaskView[]> {
  const groups = new Map<string, TaskView[]>();
  for (const task of tasks) {
    const group = groups.get(task.resource);
    if (group === undefined) groups.set(task.resource, [task]);
    else group.push(task);
  }
  for (const group of groups.values()) group.sort(compareLatest);
  return groups;
}

/** Pure: the rows of one resource, from its tasks (latest first), owner view and fence. */
export function rowsOf(
  group: readonly TaskView[],
  owner: ResourceOwnerView | undefined,
  fence: bigint | undefined,
  all: boolean,
): StatusRow[] {
  const setBy =
    fence === undefined
      ? undefined
      : owner?.owner != null && owner.token === fence.toString()
        ? owner.owner.taskId
        : group.find((t) => tokensOf(t).includes(fence))?.taskId;
  return (all ? group : group.slice(0, 1)).map((task): StatusRow => {
    const held = owner?.owner?.taskId === task.taskId ? owner.owner : undefined;
    const token = held === undefined ? latestToken(task) : BigInt(held.token);
    return {
      resource: task.resource,
      task: task.taskId,
      queue: task.queue,
      state: held === undefined ? task.state : 'leased',
      owner: held?.workerId ?? '',
      token: token === undefined ? '' : token.toString(),
      fence: fence === undefined ? '?' : fence.toString(),
      fenceSetBy: setBy === task.taskId ? undefined : setBy,
      leftMs: held === undefined ? null : (owner?.remainingMs ?? null),
      attempts: task.attempts,
    };
  });
}

/**
 * The most tasks one `leasehold status` reads (in id order, pages of 500): on a backlog of a
 * million it shows the first ones and says so, instead of holding every task in the CLI.
 */
export const STATUS_MAX_TASKS = 5_000;
/** Owner and fence reads in flight at once (two per resource shown). */
const STATUS_READS_IN_FLIGHT = 16;

export interface Status {
  readonly rows: StatusRow[];
  /** More tasks exist than the {@link STATUS_MAX_TASKS} read. */
  readonly more: boolean;
}

/** The first `max` tasks in id order, by pages of at most 500; `more` when the list goes on. */
export async function firstTasks(
  admin: Pick<LeaseholdClient, 'list'>,
  max: number,
): Promise<{ tasks: TaskView[]; more: boolean }> {
  const tasks: TaskView[] = [];
  let after: string | undefined;
  while (tasks.length < max) {
    const page = await admin.list({
      limit: Math.min(500, max - tasks.length),
      ...(after === undefined ? {} : { after }),
    });
    tasks.push(...page.tasks);
    if (page.next === null || page.tasks.length === 0) return { tasks, more: false };
    after = page.next;
  }
  return { tasks, more: true };
}

export async function collectStatus(
  admin: LeaseholdClient,
  sink: SinkClient,
  options: { readonly all?: boolean; readonly maxTasks?: number } = {},
): Promise<Status> {
  const { tasks, more } = await firstTasks(admin, options.maxTasks ?? STATUS_MAX_TASKS);
  const groups = [...tasksByResource(tasks).entries()];
  const perResource: StatusRow[][] = [];
  for (let i = 0; i < groups.length; i += STATUS_READS_IN_FLIGHT) {
    const slice = groups.slice(i, i + STATUS_READS_IN_FLIGHT);
    perResource.push(
      ...(await Promise.all(
        slice.map(async ([resource, group]) => {
          const [owner, fence] = await Promise.all([
            admin.resource(resource).catch((): ResourceOwnerView | undefined => undefined),
            sink.getFence(resource).then(
              (fence) => fence,
              () => undefined,
            ),
          ]);
          return rowsOf(group, owner, fence, options.all === true);
        }),
      )),
    );
  }
  // Resources by the state of their latest task, then by name; --all keeps each resource's order.
  perResource.sort(
    (a, b) =>
      taskStateRank(a[0]?.state) - taskStateRank(b[0]?.state) ||
      (a[0]?.resource ?? '').localeCompare(b[0]?.resource ?? ''),
  );
  return { rows: perResource.flat(), more };
}

/** SGR colours of the states. */
const COLOUR: Record<string, string> = {
  leased: '33',
  pending: '36',
  delayed: '34',
  failed: '31',
  completed: '32',
  cancelled: '90',
};

/**
 * Colour on a terminal, unless NO_COLOR is set to anything non-empty (https://no-color.org).
 * `env` and `isTty` are given by the caller (main reads process.env).
 */
export function useColour(isTty: boolean | undefined, env: Readonly<Record<string, string | undefined>>): boolean {
  return isTty === true && (env.NO_COLOR ?? '') === '';
}

export function renderStatus(rows: readonly StatusRow[], colour: boolean, limit = 40, more = false): string {
  const header = ['RESOURCE', 'TASK', 'QUEUE', 'STATE', 'OWNER', 'TOKEN', 'FENCE', 'LEASE LEFT', 'TRIES'];
  const shown = rows.slice(0, limit);
  const cells = shown.map((r) => [
    r.resource,
    r.task,
    r.queue,
    r.state,
    r.owner || '-',
    r.token || '-',
    r.fenceSetBy === undefined ? r.fence : `${r.fence} by ${r.fenceSetBy}`,
    r.leftMs === null ? '-' : `${(r.leftMs / 1000).toFixed(1)}s`,
    String(r.attempts),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const STATE = 3;
  const line = (c: readonly string[], state?: string) =>
    c
      .map((v, i) => {
        const padded = v.padEnd(widths[i] ?? 0);
        // Only the state cell is coloured: the columns stay aligned and the rest stays readable.
        return colour && i === STATE && state !== undefined
          ? `\u001b[${COLOUR[state] ?? '0'}m${padded}\u001b[0m`
          : padded;
      })
      .join('  ')
      .trimEnd();
  const resources = new Set(rows.map((r) => r.resource)).size;
  const latest = rows.filter((r, i) => i === 0 || rows[i - 1]?.resource !== r.resource);
  const counts = countStates(latest);
  const out = [
    colour ? `\u001b[1m${line(header)}\u001b[0m` : line(header),
    ...cells.map((c, i) => line(c, shown[i]?.state)),
  ];
  if (rows.length > limit) out.push(`… ${rows.length - limit} more rows (--json for all)`);
  out.push('', `${resources} resources: ${counts.join(', ')}`);
  out.push(...queueSummary(rows));
  if (more) out.push(`(the first ${STATUS_MAX_TASKS} tasks in id order: counts are of those)`);
  return out.join('\n');
}

const STATES = ['leased', 'pending', 'delayed', 'failed', 'completed', 'cancelled'] as const;

function countStates(rows: readonly StatusRow[]): string[] {
  return STATES.map((s) => [s, rows.filter((r) => r.state === s).length] as const)
    .filter(([s, n]) => n > 0 || s === 'leased' || s === 'pending')
    .map(([s, n]) => `${n} ${s}`);
}

/** Pure: one line per queue of the rows (default first, then by name): its tasks by state. */
export function queueSummary(rows: readonly StatusRow[]): string[] {
  const byQueue = new Map<string, StatusRow[]>();
  for (const r of rows) {
    const list = byQueue.get(r.queue);
    if (list === undefined) byQueue.set(r.queue, [r]);
    else list.push(r);
  }
  const names = [...byQueue.keys()].sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a.localeCompare(b)));
  return names.map((q) => `queue ${q}: ${countStates(byQueue.get(q) ?? []).join(', ')}`);
}
