/**
 * A poison task on real processes: its handler SIGKILLs the worker process running it, every time.
 * Each death leaves a lease that only expires; each expiry counts as an attempt; after the policy's
 * 3 attempts the task ends `failed` (not looping for ever), while an ordinary task submitted next to
 * it completes on the same, restarted, workers.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCluster } from '../harness/fixtures.js';
import { REPO_ROOT, waitFor } from '../harness/service.js';

const HANDLER = join(REPO_ROOT, 'test/e2e/fixtures/kill-handler.mjs');
const cluster = useCluster({
  coordinators: 1,
  workers: 0,
  sessionTtlMs: 1_000,
  heartbeatIntervalMs: 200,
  coordinatorEnv: { LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS: '3' },
  workerEnv: { LEASEHOLD_WORKER_HANDLER: HANDLER },
});

interface View {
  state: string;
  attempts: number;
  lastError?: { name: string };
  history: { outcome: string; workerId: string }[];
}

describe('a task that kills every worker it lands on', () => {
  it('ends failed after its attempts, with each lost lease recorded', async () => {
    const admin = cluster.admin();
    expect((await admin.submit({ taskId: 'poison', resource: 'poison/1', payload: { kill: true } })).status).toBe(201);
    expect((await admin.submit({ taskId: 'fine', resource: 'fine/1', payload: {} })).status).toBe(201);
    const worker = await cluster.addWorker('phoenix');
    // A supervisor: restart the worker whenever it died (as systemd's Restart=always would).
    const supervise = async (): Promise<void> => {
      if (!worker.isRunning()) await worker.start();
    };
    const view = await waitFor(
      'the poison task to fail',
      async () => {
        await supervise();
        const v = (await admin.task('poison')).body as View;
        return v.state === 'failed' ? v : undefined;
      },
      60_000,
      100,
    );
    expect(view).toMatchObject({ attempts: 3, lastError: { name: 'LeaseExpired' } });
    expect(view.history.map((h) => h.outcome)).toEqual(['expired', 'expired', 'expired']);
    expect(worker.exits.filter((e) => e.signal === 'SIGKILL').length).toBeGreaterThanOrEqual(3);
    const fine = await waitFor('the ordinary task', async () => {
      await supervise();
      const v = (await admin.task('fine')).body as View;
      return v.state === 'completed' ? v : undefined;
    });
    expect(fine.attempts).toBe(1);
    // The failed task is in the dead-letter view and is never granted again.
    const failed = (await admin.tasks('?state=failed')).body as { tasks: { taskId: string }[] };
    expect(failed.tasks.map((t) => t.taskId)).toEqual(['poison']);
  });
});
