/**
 * Two coordinators; workers hold leases; one coordinator is SIGKILLed. Workers fail over to the
 * other, resume their sessions, no task runs twice concurrently, and the workload completes.
 */
import { describe, expect, it } from 'vitest';
import { useCluster } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const TASKS = 40;
const cluster = useCluster({
  coordinators: 2,
  workers: 3,
  sessionTtlMs: 4_000,
  workerEnv: { LEASEHOLD_WORKER_CONCURRENCY: '2', LEASEHOLD_WORKER_DEMO_DURATION_MS: '400' },
});

interface LogLine {
  msg?: string;
  taskId?: string;
  token?: string;
  time?: number;
  resumed?: boolean;
}

function lines(text: string): LogLine[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

describe('coordinator failover', () => {
  it('moves workers to the surviving coordinator without losing sessions or running a task twice at once', async () => {
    for (let i = 0; i < TASKS; i++) {
      await cluster.admin(1).submit({ taskId: `f-${i}`, resource: `inv/${i % 10}`, payload: { n: i } });
    }
    // Let leases be held, then kill the coordinator the workers connected to first.
    // Every worker holds leases (3 workers × 2 slots) before the kill.
    await waitFor('every worker holding a lease', () =>
      cluster.workers.every((w) => w.log().includes('lease granted')) ? true : undefined,
    );
    await cluster.coordinators[0]!.kill();

    await waitFor(
      'all tasks to complete',
      async () => {
        const all = await Promise.all(
          Array.from(
            { length: TASKS },
            async (_, i) => ((await cluster.admin(1).task(`f-${i}`)).body as { state: string }).state,
          ),
        );
        return all.every((s) => s === 'completed') ? true : undefined;
      },
      90_000,
      250,
    );

    // Sessions resumed on the survivor.
    const resumed = cluster.workers.filter((w) => lines(w.log()).some((l) => l.msg === 'session resumed'));
    expect(resumed.length).toBeGreaterThan(0);

    // No task ran twice concurrently: per task, grant→(completed|lost) intervals across workers never overlap.
    const intervals = new Map<string, { start: number; end: number; worker: string }[]>();
    for (const w of cluster.workers) {
      const open = new Map<string, number>();
      for (const l of lines(w.log())) {
        if (l.taskId === undefined || l.time === undefined) continue;
        if (l.msg === 'lease granted') open.set(l.taskId, l.time);
        if (
          l.msg === 'task completed' ||
          l.msg === 'lease lost; task left to the next holder' ||
          l.msg === 'lease released'
        ) {
          const start = open.get(l.taskId);
          if (start !== undefined) {
            const list = intervals.get(l.taskId) ?? [];
            list.push({ start, end: l.time, worker: w.spec.name });
            intervals.set(l.taskId, list);
            open.delete(l.taskId);
          }
        }
      }
    }
    for (const [taskId, list] of intervals) {
      const sorted = [...list].sort((x, y) => x.start - y.start);
      for (let i = 1; i < sorted.length; i++) {
        expect(sorted[i]!.start, `task ${taskId} ran concurrently`).toBeGreaterThanOrEqual(sorted[i - 1]!.end);
      }
    }
    // Each task has exactly one result, and no stale write reached the sink.
    for (let i = 0; i < TASKS; i++) {
      const task = (await cluster.admin(1).task(`f-${i}`)).body as { resource: string; result: { resultId: string } };
      const view = await cluster.sinkClient.getResource(task.resource);
      expect(view.results.filter((r) => r.resultId === task.result.resultId)).toHaveLength(1);
    }
  });
});
