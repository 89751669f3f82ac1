/**
 * etcd + sink + coordinator + 3 workers as processes run a workload to completion; every task is
 * completed with exactly one result at the sink, written under the token the coordinator recorded.
 */
import { describe, expect, it } from 'vitest';
import { allDecisions } from '../harness/cluster.js';
import { useCluster } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const TASKS = 60;
const cluster = useCluster({
  coordinators: 1,
  workers: 3,
  sessionTtlMs: 3_000,
  workerEnv: { LEASEHOLD_WORKER_CONCURRENCY: '2', LEASEHOLD_WORKER_DEMO_DURATION_MS: '50' },
});

describe('demo workload on real processes', () => {
  it('completes every task with exactly one result at the sink', async () => {
    for (let i = 0; i < TASKS; i++) {
      const res = await cluster.admin().submit({ taskId: `w-${i}`, resource: `acct/${i % 12}`, payload: { n: i } });
      expect(res.status).toBeLessThan(300);
    }
    // Submitting the same task again is idempotent.
    expect(
      (await cluster.admin().submit({ taskId: 'w-0', resource: 'acct/0', payload: { n: 0 } })).status,
    ).toBeLessThan(300);
    expect((await cluster.admin().submit({ taskId: 'w-0', resource: 'acct/0', payload: { n: 1 } })).status).toBe(409);

    await waitFor(
      'all tasks to complete',
      async () => {
        const states = await Promise.all(
          Array.from(
            { length: TASKS },
            async (_, i) => ((await cluster.admin().task(`w-${i}`)).body as { state: string }).state,
          ),
        );
        return states.every((s) => s === 'completed') ? true : undefined;
      },
      90_000,
      250,
    );

    for (let i = 0; i < TASKS; i++) {
      const task = (await cluster.admin().task(`w-${i}`)).body as {
        resource: string;
        result: { resultId: string; token: string };
      };
      const view = await cluster.sinkClient.getResource(task.resource);
      const mine = view.results.filter((r) => r.resultId === task.result.resultId);
      expect(mine).toHaveLength(1);
      expect(mine[0]!.token).toBe(BigInt(task.result.token));
    }
    // Nothing stale reached the sink in a fault-free run, and every worker did some work.
    const decisions = await allDecisions(cluster.sinkClient);
    expect(decisions.filter((d) => d.outcome === 'STALE_TOKEN' || d.outcome === 'FENCE_CONFLICT')).toEqual([]);
    for (const w of cluster.workers)
      await waitFor(`${w.spec.name} to log a completion`, () => w.log().includes('task completed'), 5_000);
  });
});
