/**
 * The design note's story with real processes: worker A takes a task and is SIGSTOPped after its
 * last local deadline check, right before sending its write; its lease expires; worker B takes over
 * (the fence advanced first) and completes; A is SIGCONTed, its write reaches the sink and is
 * refused with STALE_TOKEN; A's AbortSignal fires; B's result stands.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allDecisions } from '../harness/cluster.js';
import { useCluster } from '../harness/fixtures.js';
import { REPO_ROOT, waitFor, type Service } from '../harness/service.js';

const HANDLER = join(REPO_ROOT, 'test/e2e/fixtures/story-handler.mjs');
const cluster = useCluster({ coordinators: 1, workers: 0, sessionTtlMs: 1_500, heartbeatIntervalMs: 300 });

function processState(pid: number): string {
  // Third field of /proc/<pid>/stat: R, S, T (stopped), ...
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[0] ?? '?';
}

function logLines(service: Service): { msg?: string; [k: string]: unknown }[] {
  return service
    .log()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string });
}

describe('design note story on real processes', () => {
  it("refuses the paused holder's write at the sink after a takeover, and the new holder's result stands", async () => {
    const env = { LEASEHOLD_WORKER_HANDLER: HANDLER };
    const a = await cluster.addWorker('worker-a', { ...env, LEASEHOLD_TEST_PAUSE_BEFORE_WRITE: '1' });
    const submitted = await cluster
      .admin()
      .submit({ taskId: 'story-1', resource: 'ledger/42', payload: { amount: 10 } });
    expect(submitted.status).toBeLessThan(300);

    // A takes the task and stops itself between its deadline check and its send.
    const paused = await waitFor('worker A to pause before its write', () =>
      logLines(a).find((l) => l.msg === 'story: pausing before write'),
    );
    const tokenA = BigInt(String(paused.token));
    await waitFor('worker A to be stopped', () => processState(a.pid!) === 'T');
    expect((await cluster.sinkClient.getResource('ledger/42')).fence).toBe(tokenA);

    // A's session expires (the coordinator's clock); B takes over; the fence moves first.
    const b = await cluster.addWorker('worker-b', env);
    const done = await waitFor(
      'the task to complete under B',
      async () => {
        const t = await cluster.admin().task('story-1');
        const body = t.body as { state: string; result?: { token: string } };
        return body.state === 'completed' ? body : undefined;
      },
      30_000,
    );
    const tokenB = BigInt(done.result!.token);
    expect(tokenB).toBeGreaterThan(tokenA);
    expect((await cluster.sinkClient.getResource('ledger/42')).fence).toBe(tokenB);
    await waitFor('B to log its completion', () => logLines(b).some((l) => l.msg === 'task completed'));

    // A wakes up: its write is sent (the SDK's check already passed) and the fence refuses it.
    a.resume();
    await waitFor(
      "A's write to be refused",
      () => logLines(a).find((l) => l.msg === 'write refused by the sink'),
      15_000,
    );
    const refusal = logLines(a).find((l) => l.msg === 'write refused by the sink')!;
    expect(refusal.code).toBe('STALE_TOKEN');
    await waitFor("A's AbortSignal to fire", () => logLines(a).some((l) => l.msg === 'story: abort signal fired'));

    // The refusal happened at the sink, with A's token, after B's advance (the decision log).
    const decisions = (await allDecisions(cluster.sinkClient)).filter((d) => d.resource === 'ledger/42');
    const stale = decisions.find((d) => d.kind === 'write' && d.outcome === 'STALE_TOKEN');
    expect(stale).toMatchObject({ token: tokenA.toString(), fenceBefore: tokenB.toString(), workerId: 'worker-a' });
    const advanceB = decisions.findIndex((d) => d.kind === 'advance' && d.token === tokenB.toString());
    expect(advanceB).toBeGreaterThanOrEqual(0);
    expect(decisions.indexOf(stale!)).toBeGreaterThan(advanceB);

    // B's result stands.
    const result = await cluster.sinkClient.getResult('ledger/42', 'task:story-1');
    expect(result).toMatchObject({
      token: tokenB,
      workerId: 'worker-b',
      payload: { taskId: 'story-1', computedBy: 'worker-b' },
    });

    // A lost its session while stopped; it opens a new one and works again (B is gone now).
    await b.stop();
    await cluster.admin().submit({ taskId: 'story-2', resource: 'ledger/43', payload: { amount: 1 } });
    const again = await waitFor(
      'A to complete a new task after losing its session',
      async () => {
        const body = (await cluster.admin().task('story-2')).body as { state: string; result?: { token: string } };
        return body.state === 'completed' ? body : undefined;
      },
      30_000,
    );
    const second = await cluster.sinkClient.getResult('ledger/43', 'task:story-2');
    expect(second).toMatchObject({ workerId: 'worker-a', token: BigInt(again.result!.token) });
  });
});
