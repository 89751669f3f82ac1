/**
 * `leasehold status`: one row per resource (a table a person reads at a glance, or `--json`).
 * (`leasehold tail` is in tail.ts.)
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

const STATE_ORDER: Record<string, number> = {
  leased: 0,
  pending: 1,
  delayed: 2,
  failed: 3,
  completed: 4,
  cancelled: 5,
};

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

const COLOUR: Record<string, string> = {
  leased: '33',
  pending: '36',
  delayed: '34',
  failed: '31',
  completed: '32',
  cancelled: '90',
};

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
  const counts = ['leased', 'pending', 'delayed', 'failed', 'completed', 'cancelled']
    .map((s) => [s, rows.filter((r) => r.state === s).length] as const)
    .filter(([s, n]) => n > 0 || s === 'leased' || s === 'pending')
    .map(([s, n]) => `${n} ${s}`);
  const out = [
    tty ? `\u001b[1m${line(header)}\u001b[0m` : line(header),
    ...cells.map((c, i) => line(c, rows[i]?.state)),
  ];
  if (rows.length > limit) out.push(`… ${rows.length - limit} more resources (--json for all)`);
  out.push('', `${rows.length} resources: ${counts.join(', ')}`);
  return out.join('\n');
}
