/**
 * `--backlog N` and a checker that survives retention, without a cluster: the flag reaches the
 * options (through cli.sh and cli-options.ts), the backlog submitter sends what backlog.ts says
 * (batches ≤ 1000, every task delayed past the run, on resources of its own, retried until
 * definite), the workload's poll never reads the backlog and notices tasks that vanish, and the
 * completion rule judges a vanished task from the workers' logs and the sink — never from a read
 * of the task. `pnpm chaos --backlog 10000 --profile short` is the real run (docs/chaos.md).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEtcd } from '@leasehold/devkit';
import { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../harness/service.js';
import {
  BACKLOG_DELAY_MS,
  BACKLOG_ID_PREFIX,
  BacklogViolation,
  checkBacklogKept,
  countBacklog,
  submitBacklog,
  type AdminCall,
  type BacklogTask,
} from './backlog.js';
import { checkHistory, ViolationName } from './checker.js';
import { optionsFromEnv } from './cli-options.js';
import { readEtcdHistory } from './collect.js';
import type { WorkerEvent } from './history.js';
import { goodHistory, mutate, names, T0 } from './history-fixture.js';
import { Workload, type TaskSpec } from './workload.js';

describe('--backlog: options', () => {
  it('LEASEHOLD_CHAOS_BACKLOG and LEASEHOLD_CHAOS_COORDINATOR_ENV become options; absent ones do not', () => {
    expect(optionsFromEnv({ LEASEHOLD_CHAOS_BACKLOG: '10000' })).toEqual({ backlog: 10_000 });
    expect(optionsFromEnv({})).toEqual({});
    expect(
      optionsFromEnv({ LEASEHOLD_CHAOS_COORDINATOR_ENV: 'LEASEHOLD_COORDINATOR_X=1\nLEASEHOLD_COORDINATOR_Y=a=b' }),
    ).toEqual({ coordinatorEnv: { LEASEHOLD_COORDINATOR_X: '1', LEASEHOLD_COORDINATOR_Y: 'a=b' } });
    expect(() => optionsFromEnv({ LEASEHOLD_CHAOS_BACKLOG: '1e5' })).toThrow(/non-negative integer/);
    expect(() => optionsFromEnv({ LEASEHOLD_CHAOS_COORDINATOR_ENV: 'lower=1' })).toThrow(/NAME=VALUE/);
  });

  it('cli.sh turns --backlog and repeated --coordinator-env into those variables', () => {
    // A stand-in `pnpm` records what the runner would have been given, in place of the run.
    const bin = mkdtempSync(join(tmpdir(), 'chaos-cli-'));
    writeFileSync(
      join(bin, 'pnpm'),
      '#!/bin/sh\nprintf "%s|%s" "$LEASEHOLD_CHAOS_BACKLOG" "$LEASEHOLD_CHAOS_COORDINATOR_ENV" > "$LEASEHOLD_CHAOS_SUMMARY_PATH_FILE"\n',
    );
    chmodSync(join(bin, 'pnpm'), 0o755);
    const r = spawnSync(
      'bash',
      ['test/chaos/cli.sh', '--backlog', '7', '--coordinator-env', 'A_B=1', '--coordinator-env', 'C=x y'],
      { cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` } },
    );
    rmSync(bin, { recursive: true, force: true });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('7|A_B=1\nC=x y');
  });
});

/** A fake admin API holding what was submitted; `fail` decides a reply before the real one. */
function fakeAdmin(fail: (call: number) => 'transport' | 503 | undefined = () => undefined) {
  const tasks = new Map<string, { taskId: string; state: string }>();
  const batches: BacklogTask[][] = [];
  let calls = 0;
  const admin: AdminCall = (method, path, body) => {
    calls += 1;
    const f = fail(calls);
    if (f === 'transport') return Promise.reject(new Error('socket hang up'));
    if (f === 503) return Promise.resolve({ status: 503, body: { code: 'UNAVAILABLE' } });
    if (method === 'POST' && path === '/v1/tasks/batch') {
      const list = (body as { tasks: BacklogTask[] }).tasks;
      batches.push(list);
      const results = list.map((t) => {
        const status = tasks.has(t.taskId) ? 200 : 201;
        tasks.set(t.taskId, { taskId: t.taskId, state: t.delayMs > 0 ? 'delayed' : 'pending' });
        return { taskId: t.taskId, status };
      });
      return Promise.resolve({ status: 200, body: { results } });
    }
    if (method === 'POST' && path === '/v1/tasks') {
      const t = body as TaskSpec;
      tasks.set(t.taskId, { taskId: t.taskId, state: 'pending' });
      return Promise.resolve({ status: 201, body: t });
    }
    const q = new URL(`http://x${path}`).searchParams;
    const after = q.get('after') ?? '';
    const limit = Number(q.get('limit') ?? 100);
    const ids = [...tasks.keys()].filter((id) => id > after).sort();
    const page = ids.slice(0, limit).map((id) => tasks.get(id)!);
    return Promise.resolve({
      status: 200,
      body: { tasks: page, next: ids.length > limit ? page.at(-1)?.taskId : null },
    });
  };
  return { admin, tasks, batches, calls: () => calls };
}

describe('--backlog: the submitter', () => {
  it('sends N tasks in batches of ≤ 1000, each delayed past the run, lowest priority, on resources of its own', async () => {
    const f = fakeAdmin();
    const stats = await submitBacklog(f.admin, { count: 2_500, concurrency: 2 });
    expect(stats).toMatchObject({ requested: 2_500, accepted: 2_500, refused: 0, batches: 3, retries: 0 });
    expect(f.batches.map((b) => b.length).sort()).toEqual([1000, 1000, 500]);
    const all = f.batches.flat();
    expect(new Set(all.map((t) => t.taskId)).size).toBe(2_500);
    for (const t of all) {
      expect(t.taskId.startsWith(BACKLOG_ID_PREFIX)).toBe(true);
      expect(t.resource.startsWith('res/')).toBe(false);
      expect(t.delayMs).toBeGreaterThanOrEqual(24 * 3_600_000);
      expect(t.priority).toBe(0);
    }
    // Every id sorts after the workloads' (mix-, reg-, retry-, clock-, takeover…): their polls stop before it.
    expect(all.every((t) => t.taskId > 'takeover-zzz' && t.taskId > 'story/9')).toBe(true);
    expect(BACKLOG_DELAY_MS).toBeGreaterThan(3_600_000 + 300_000);
  });

  it('sends a batch again after a 503 or a transport failure, and counts refused items', async () => {
    const f = fakeAdmin((call) => (call === 1 ? 503 : call === 2 ? 'transport' : undefined));
    const stats = await submitBacklog(f.admin, { count: 10, batch: 5, concurrency: 1 });
    expect(stats).toMatchObject({ accepted: 10, retries: 2, batches: 2 });
    expect(stats.firstRetry).toMatch(/^503 /);
    const refusing: AdminCall = () =>
      Promise.resolve({ status: 200, body: { results: [{ taskId: 'a', status: 409 }, { status: 201 }] } });
    expect(await submitBacklog(refusing, { count: 2 })).toMatchObject({
      accepted: 1,
      refused: 1,
      firstRefusal: 'a: 409',
    });
    const invalid: AdminCall = () => Promise.resolve({ status: 400, body: { code: 'INVALID_MESSAGE' } });
    await expect(submitBacklog(invalid, { count: 2 })).rejects.toThrow(/refused: 400/);
  });

  it('counts the backlog still listed, from its prefix, and stops at the first other id', async () => {
    const f = fakeAdmin();
    await submitBacklog(f.admin, { count: 2_345 });
    f.tasks.set('zzz-after', { taskId: 'zzz-after', state: 'pending' });
    f.tasks.set('mix-1-0', { taskId: 'mix-1-0', state: 'pending' });
    const c = await countBacklog(f.admin);
    expect(c).toMatchObject({ listed: 2_345, complete: true, byState: { delayed: 2_345 } });
  });

  it('backlog-not-kept: a backlog task granted, or fewer listed at the end than submitted', () => {
    const stats = { requested: 3, accepted: 3, refused: 0, batches: 1, retries: 0, submitMs: 1, perSecond: 3 };
    const kept = { byState: { delayed: 3 }, listed: 3, complete: true, ms: 1 };
    expect(checkBacklogKept(stats, kept, { events: [] })).toEqual([]);
    const grant: WorkerEvent = {
      kind: 'grant',
      atMs: T0,
      process: 'worker-0',
      workerId: 'worker-0',
      taskId: `${BACKLOG_ID_PREFIX}1`,
      resource: 'zz-backlog/1',
      token: '9',
    };
    expect(names(checkBacklogKept(stats, kept, { events: [grant] }))).toEqual([BacklogViolation.NOT_KEPT]);
    expect(names(checkBacklogKept(stats, { ...kept, listed: 2 }, { events: [] }))).toEqual([BacklogViolation.NOT_KEPT]);
    // A count that ran out of time judges nothing.
    expect(checkBacklogKept(stats, { ...kept, listed: 2, complete: false }, { events: [] })).toEqual([]);
  });
});

const spec = (n: number): TaskSpec => ({
  taskId: `mix-1-${n}`,
  resource: `res/${n % 3}`,
  payload: { n, deterministic: false, computeMs: 10, pauseMs: 0 },
});

describe('the workload with a backlog and retention', () => {
  it("pages only up to the workload's last id, never through the backlog", async () => {
    const f = fakeAdmin();
    const w = new Workload({ admin: f.admin });
    for (let n = 0; n < 3; n += 1) await w.submit(spec(n));
    await submitBacklog(f.admin, { count: 5_000 });
    const before = f.calls();
    expect(await w.poll()).toBe(true);
    expect(f.calls() - before).toBe(1);
    expect(w.finalTasks().map((t) => t.state)).toEqual(['pending', 'pending', 'pending']);
  });

  it('one poll at a time: a second caller shares the poll in flight', async () => {
    const f = fakeAdmin();
    const w = new Workload({ admin: f.admin });
    await w.submit(spec(0));
    const before = f.calls();
    await Promise.all([w.poll(), w.poll(), w.poll()]);
    expect(f.calls() - before).toBe(1);
  });

  it('marks a task that vanished from a whole pass as removed, keeping what it was last seen as', async () => {
    const f = fakeAdmin();
    const w = new Workload({ admin: f.admin });
    for (let n = 0; n < 2; n += 1) await w.submit(spec(n));
    await w.poll();
    f.tasks.set('mix-1-0', { taskId: 'mix-1-0', state: 'completed' });
    await w.poll();
    f.tasks.delete('mix-1-0');
    await w.poll();
    const [gone, kept] = w.finalTasks();
    expect(gone).toMatchObject({ taskId: 'mix-1-0', state: 'removed', lastSeenState: 'completed' });
    expect(gone?.removedSeenAtMs).toBeGreaterThan(0);
    expect(gone?.completedSeenAtMs).toBeLessThanOrEqual(gone?.removedSeenAtMs ?? 0);
    expect(kept).toMatchObject({ taskId: 'mix-1-1', state: 'pending' });
  });
});

describe('completion under retention: ended tasks are never read back', () => {
  // The fixture's task t1: w2 completed it at T0 + 3120 (its `task completed` log line), its
  // result task:t1 is at the sink; the faults healed at T0 + 5000, bound 3000 ms.
  const removed = (extra = {}) => ({ taskId: 't1', state: 'removed', removedSeenAtMs: T0 + 9_000, ...extra });

  it('a removed task whose worker logged the completion, with its result at the sink, is fine', () => {
    const h = mutate((h) => {
      h.finalTasks = [removed()];
      h.events = h.events.map((e) => (e.kind === 'complete' ? { ...e, resultId: 'task:t1' } : e));
    });
    // Seen gone only after the bound: the worker's log time (T0 + 3120) is when it ended.
    expect(checkHistory(h)).toEqual([]);
    expect(checkHistory(mutate((h) => void (h.finalTasks = [removed()])))).toEqual([]);
  });

  it('task-not-completed: a removed task that nothing shows ended', () => {
    const h = mutate((h) => {
      h.finalTasks = [removed({ lastSeenState: 'pending' })];
      h.events = h.events.filter((e) => e.kind !== 'complete');
    });
    const v = checkHistory(h);
    expect(names(v)).toEqual([ViolationName.TASK_NOT_COMPLETED]);
    expect(v[0]?.message).toMatch(/removed from the coordinator/);
  });

  it('a removed task seen completed before it went needs no log line', () => {
    const h = mutate((h) => {
      h.finalTasks = [removed({ lastSeenState: 'completed', completedSeenAtMs: T0 + 3_200 })];
      h.events = h.events.filter((e) => e.kind !== 'complete');
    });
    expect(checkHistory(h)).toEqual([]);
  });

  it('completed-without-result: a removed completed task whose result is not at the sink', () => {
    const h = mutate((h) => {
      h.finalTasks = [removed()];
      h.events = h.events.map((e) => (e.kind === 'complete' ? { ...e, resultId: 'task:t1-other' } : e));
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.COMPLETED_WITHOUT_RESULT]);
  });

  it('task-not-completed: removed, and the completion logged after the bound', () => {
    const h = mutate((h) => {
      h.finalTasks = [removed()];
      h.events = h.events.map((e) => (e.kind === 'complete' ? { ...e, atMs: T0 + 8_500 } : e));
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.TASK_NOT_COMPLETED]);
    expect(goodHistory().finalTasks[0]?.state).toBe('completed');
  });
});

describe("etcd's history with a big backlog (a real etcd)", () => {
  it('is read past 4 MiB of task records, and the backlog is left out of it', { timeout: 60_000 }, async () => {
    const etcd = await startEtcd();
    const client = new Etcd3({ hosts: etcd.endpoints });
    try {
      // ~5 MiB of task records in 40 revisions (and as much backlog): one catch-up response is past gRPC's 4 MiB.
      const put = async (id: (n: number) => string, padBytes: number) => {
        for (let b = 0; b < 40; b += 1) {
          const ops = Array.from({ length: 125 }, (_, k) => {
            const taskId = id(b * 125 + k);
            return client
              .put(`p/tasks/${taskId}`)
              .value(JSON.stringify({ taskId, state: 'pending', pad: 'x'.repeat(padBytes) }));
          });
          await client
            .if('p/none', 'Create', '==', 0)
            .then(...ops)
            .commit();
        }
      };
      await put((n) => `mix-1-${n}`, 1_000);
      await put((n) => `${BACKLOG_ID_PREFIX}${n}`, 1_000);
      await client.put('p/owners/r1').value(JSON.stringify({ taskId: 'mix-1-0', workerId: 'w' }));
      const h = await readEtcdHistory(etcd.endpoints, 'p/', undefined, 500, 20_000);
      expect(h?.owners.map((o) => o.resource)).toEqual(['r1']);
      expect(h?.taskVersions).toHaveLength(5_000);
      expect(h?.taskVersions.some((v) => v.taskId.startsWith(BACKLOG_ID_PREFIX))).toBe(false);
    } finally {
      client.close();
      await etcd.stop();
    }
  });
});
