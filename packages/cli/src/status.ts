/**
 * `leasehold status` (a table a person reads at a glance, or `--json`) and `leasehold tail`
 * (grants, expiries and stale-write refusals as they happen).
 */
import type { SinkClient } from '@leasehold/sink-client';
import type { LeaseholdClient, ResourceOwnerView, TaskView } from '@leasehold/client';

export interface StatusRow {
  readonly resource: string;
  readonly task: string;
  readonly state: string;
  readonly owner: string;
  readonly token: string;
  readonly fence: string;
  readonly leftMs: number | null;
  readonly attempts: number;
}

const STATE_ORDER: Record<string, number> = { leased: 0, pending: 1, completed: 2, cancelled: 3 };

export async function collectStatus(admin: LeaseholdClient, sink: SinkClient): Promise<StatusRow[]> {
  const tasks = await admin.tasks();
  // One row per resource: its live task first (leased, then pending), else its latest task.
  const byResource = new Map<string, TaskView>();
  for (const task of tasks) {
    const current = byResource.get(task.resource);
    if (current === undefined || (STATE_ORDER[task.state] ?? 9) < (STATE_ORDER[current.state] ?? 9))
      byResource.set(task.resource, task);
  }
  const rows = await Promise.all(
    [...byResource.values()].map(async (task): Promise<StatusRow> => {
      const [owner, fence] = await Promise.all([
        admin.resource(task.resource).catch((): ResourceOwnerView | undefined => undefined),
        sink.getResource(task.resource).then(
          (v) => v.fence.toString(),
          () => '?',
        ),
      ]);
      const held = owner?.owner ?? undefined; // null (free) -> undefined
      return {
        resource: task.resource,
        task: held?.taskId ?? task.taskId,
        state: held === undefined ? task.state : 'leased',
        owner: held?.workerId ?? '',
        token: (held === undefined ? undefined : owner?.token) ?? task.result?.token ?? '',
        fence,
        leftMs: held === undefined ? null : (owner?.remainingMs ?? null),
        attempts: task.attempts,
      };
    }),
  );
  return rows.sort(
    (a, b) => (STATE_ORDER[a.state] ?? 9) - (STATE_ORDER[b.state] ?? 9) || a.resource.localeCompare(b.resource),
  );
}

const COLOUR: Record<string, string> = { leased: '33', pending: '36', completed: '32', cancelled: '90' };

export function renderStatus(rows: readonly StatusRow[], tty: boolean, limit = 40): string {
  const header = ['RESOURCE', 'TASK', 'STATE', 'OWNER', 'TOKEN', 'FENCE', 'LEASE LEFT', 'TRIES'];
  const cells = rows
    .slice(0, limit)
    .map((r) => [
      r.resource,
      r.task,
      r.state,
      r.owner || '-',
      r.token || '-',
      r.fence,
      r.leftMs === null ? '-' : `${(r.leftMs / 1000).toFixed(1)}s`,
      String(r.attempts),
    ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const line = (c: readonly string[], state?: string) => {
    const text = c.map((v, i) => v.padEnd(widths[i] ?? 0)).join('  ');
    return tty && state !== undefined ? `\u001b[${COLOUR[state] ?? '0'}m${text}\u001b[0m` : text;
  };
  const counts = ['leased', 'pending', 'completed', 'cancelled'].map(
    (s) => `${rows.filter((r) => r.state === s).length} ${s}`,
  );
  const out = [
    tty ? `\u001b[1m${line(header)}\u001b[0m` : line(header),
    ...cells.map((c, i) => line(c, rows[i]?.state)),
  ];
  if (rows.length > limit) out.push(`… ${rows.length - limit} more resources (--json for all)`);
  out.push('', `${rows.length} resources: ${counts.join(', ')}`);
  return out.join('\n');
}

/** Follow the sink's decision log and the coordinator's task states; print one line per event. */
export async function tail(
  admin: LeaseholdClient,
  sink: SinkClient,
  write: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  let cursor = (await sink.decisions(0, 1)).oldestRetained;
  // Start at the end of the log: find the newest sequence number.
  for (;;) {
    const page = await sink.decisions(cursor, 1000);
    if (page.decisions.length === 0) break;
    cursor = page.next;
  }
  let states = new Map((await admin.tasks()).map((t) => [t.taskId, t.state]));
  const stamp = () => new Date().toISOString().slice(11, 23);
  while (!signal.aborted) {
    const page = await sink.decisions(cursor, 1000);
    cursor = page.next;
    for (const d of page.decisions) {
      if (d.kind === 'advance' && d.outcome === 'advanced')
        write(`${stamp()} grant      ${d.resource} token ${d.token} (fence advanced from ${d.fenceBefore})`);
      else if (d.outcome === 'STALE_TOKEN' && d.kind === 'write') {
        write(
          `${stamp()} STALE      ${d.resource} write by ${d.workerId ?? '?'} with token ${d.token} refused (fence ${d.fenceBefore})`,
        );
      } else if (d.outcome === 'written')
        write(`${stamp()} write      ${d.resource} token ${d.token} ${d.resultId ?? ''}`);
      else if (d.outcome === 'RESULT_CONFLICT' || d.outcome === 'FENCE_CONFLICT')
        write(`${stamp()} ${d.outcome} ${d.resource} token ${d.token}`);
    }
    const next = new Map((await admin.tasks()).map((t) => [t.taskId, t.state]));
    for (const [taskId, state] of next) {
      const before = states.get(taskId);
      if (before === 'leased' && state === 'pending')
        write(`${stamp()} expired    task ${taskId} back to pending (lease expired or released)`);
      else if (before !== state && state === 'completed') write(`${stamp()} completed  task ${taskId}`);
    }
    states = next;
    await new Promise((r) => setTimeout(r, 250));
  }
}
