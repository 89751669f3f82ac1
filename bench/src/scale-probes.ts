/**
 * The scale suite's steps, each observed from outside the coordinator: a batch submit from a child
 * process (CPU of every side from /proc), "the index holds N tasks" from the coordinator's own
 * `leasehold_coordinator_tasks{state}` gauge, admin API latencies (list, purge, a task read), tasks
 * ended through raw WebSocket workers, and whether this coordinator has a retention setting at all
 * (its `--help`). Nothing here reads the coordinator's etcd layout, so the suite runs unchanged
 * whether payloads live in the task record or under keys of their own.
 */
import { spawnSync } from 'node:child_process';
import { NodeChild } from './infra/child.js';
import { cpuMs } from './infra/proc.js';
import { isGrant, pool, RawWorker } from './infra/raw-worker.js';
import { COORDINATOR_MAIN, type Stack } from './infra/stack.js';
import { median } from './measure.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface SubmitSpec {
  readonly idPrefix: string;
  readonly resourcePrefix: string;
  readonly count: number;
  readonly batch: number;
  readonly concurrency: number;
  readonly payloadBytes: number;
}

export interface SubmitOutcome {
  readonly accepted: number;
  readonly errors: number;
  readonly elapsedMs: number;
  /** Tasks accepted per second after the checked warm-up (see {@link steadyRate}). */
  readonly steady: { readonly rate: number; readonly steady: boolean; readonly warmupSeconds: number };
  /** µs of CPU per accepted task. */
  readonly cpuUs: { readonly coordinator: number; readonly etcd: number; readonly submitter: number };
  readonly requests: number;
  readonly retries: number;
  readonly firstError: string;
  /** Set when the coordinator process exited during the submit (e.g. out of memory). */
  readonly coordinatorExit?: string;
}

/**
 * The rate of a one-shot job from its per-second counts, after a checked warm-up as in
 * measure.ts: seconds are discarded until two consecutive ones agree within 10 %, and the last
 * (partial) second is dropped. Never steady: the whole run's rate, said so.
 */
export function steadyRate(slices: readonly number[]): { rate: number; steady: boolean; warmupSeconds: number } {
  const whole = slices.slice(0, -1);
  for (let i = 1; i < whole.length - 1; i += 1) {
    const a = whole[i - 1] ?? 0;
    const b = whole[i] ?? 0;
    if (b > 0 && Math.abs(a - b) <= 0.1 * Math.max(a, b)) {
      const rest = whole.slice(i + 1);
      return { rate: rest.reduce((x, y) => x + y, 0) / rest.length, steady: true, warmupSeconds: i + 1 };
    }
  }
  const total = slices.reduce((x, y) => x + y, 0);
  return { rate: slices.length > 0 ? total / slices.length : 0, steady: false, warmupSeconds: 0 };
}

/** Submit `spec.count` tasks from a child process; logs progress every 10 s. */
export async function submitFromChild(
  stack: Stack,
  etcdPid: number,
  spec: SubmitSpec,
  log: (line: string) => void,
): Promise<SubmitOutcome> {
  const child = new NodeChild('submitter.js', `submitter-${spec.idPrefix}`);
  const coordinator = stack.coordinator;
  try {
    const pids = [coordinator.pid, etcdPid, child.pid];
    const before = pids.map((p) => cpuMs(p) ?? 0);
    await child.request(
      {
        type: 'start',
        url: coordinator.url,
        adminKey: stack.keys.adminKey,
        from: 0,
        ...spec,
      },
      'started',
    );
    const t0 = performance.now();
    let exit: string | undefined;
    const done = child.request({ type: 'stop' }, 'stopped', 24 * 3_600_000);
    const state = { finished: false };
    const finish = () => {
      state.finished = true;
    };
    done.then(finish, finish);
    let last = t0;
    while (!state.finished) {
      await sleep(250);
      if (coordinator.child.exitCode !== null || coordinator.child.signalCode !== null) {
        // Every request would now fail after its retries: stop here with what was accepted.
        exit = `the coordinator exited (${coordinator.child.exitCode ?? coordinator.child.signalCode ?? '?'}) during the submit, after ${Math.round((performance.now() - t0) / 1000)} s`;
        break;
      }
      if (performance.now() - last >= 10_000) {
        last = performance.now();
        const s = await child.request({ type: 'sample' }, 'sample').catch(() => ({ ops: 0, errors: 0 }));
        log(
          `scale: ${Number(s.ops)} of ${spec.count} ${spec.idPrefix}* tasks accepted after ${Math.round((last - t0) / 1000)} s` +
            (Number(s.errors) > 0 ? ` (${Number(s.errors)} not accepted)` : ''),
        );
      }
    }
    const after = pids.map((p) => cpuMs(p) ?? 0);
    const final = await child.request({ type: 'sample' }, 'sample').catch(() => ({ ops: 0, errors: spec.count }));
    const summary: Record<string, unknown> =
      exit === undefined
        ? await done
        : { elapsedMs: performance.now() - t0, requests: Number.NaN, retries: Number.NaN };
    const accepted = Number(final.ops);
    const per = (i: number) => (accepted > 0 ? (((after[i] ?? 0) - (before[i] ?? 0)) * 1000) / accepted : 0);
    const slices = Array.isArray(summary.slices) ? (summary.slices as number[]) : [];
    return {
      accepted,
      errors: Number(final.errors),
      elapsedMs: Number(summary.elapsedMs),
      steady: steadyRate(slices),
      cpuUs: { coordinator: per(0), etcd: per(1), submitter: per(2) },
      requests: Number(summary.requests),
      retries: Number(summary.retries),
      firstError: typeof summary.firstError === 'string' ? summary.firstError : '',
      ...(exit === undefined ? {} : { coordinatorExit: exit }),
    };
  } finally {
    await child.kill();
  }
}

/**
 * `leasehold_coordinator_tasks{state}` from a /metrics text (undefined: no such gauge). Other
 * labels on the same series (a coordinator id, say) are allowed; values of one state add up.
 */
export function parseTaskGauge(text: string): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^leasehold_coordinator_tasks\{([^}]*)\} (\S+)$/gm)) {
    const state = /(?:^|,)state="([a-z_]+)"/.exec(m[1] ?? '')?.[1];
    if (state !== undefined) out[state] = (out[state] ?? 0) + Number(m[2]);
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** The task gauge of a coordinator (see {@link parseTaskGauge}). */
export async function taskGauge(url: string): Promise<Record<string, number> | undefined> {
  return parseTaskGauge(await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text());
}

/** Tasks not yet ended as the gauge counts them (pending, delayed, leased). */
export const openTasksOf = (g: Record<string, number>): number => (g.pending ?? 0) + (g.delayed ?? 0) + (g.leased ?? 0);

/**
 * Wait until the coordinator's index holds at least `expected` open tasks (its task gauge), up to
 * `timeoutMs`. Returns the gauge, or undefined when the coordinator has no such gauge.
 */
export async function waitIndexed(
  url: string,
  expected: number,
  timeoutMs: number,
): Promise<Record<string, number> | undefined> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const g = await taskGauge(url).catch((): Record<string, number> => ({}));
    if (g === undefined) return undefined;
    if (openTasksOf(g) >= expected) return g;
    if (performance.now() > deadline)
      throw new Error(`the index holds ${openTasksOf(g)} open tasks after ${timeoutMs} ms, expected ${expected}`);
    await sleep(250);
  }
}

export interface Timed {
  readonly status: number;
  readonly ms: number;
  readonly body: unknown;
  readonly bytes: number;
}

/** One admin API request, timed (a transport failure is status 0). */
export async function timedAdmin(
  url: string,
  key: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  timeoutMs = 120_000,
): Promise<Timed> {
  const t0 = performance.now();
  try {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      // not JSON
    }
    return { status: res.status, ms: performance.now() - t0, body: parsed, bytes: text.length };
  } catch (err) {
    return { status: 0, ms: performance.now() - t0, body: String(err), bytes: 0 };
  }
}

/** The error code of a refused admin reply (`{code}` or `{error:{code}}`), or the transport error. */
export function codeOf(t: Timed): string {
  const b = t.body as { code?: unknown; error?: { code?: unknown } } | string;
  if (typeof b === 'string') return b.slice(0, 120);
  const code = b.code ?? b.error?.code;
  return typeof code === 'string' ? code : '?';
}

export interface ListProbe {
  readonly path: string;
  readonly medianMs: number;
  readonly maxMs: number;
  readonly statuses: readonly number[];
  readonly failure?: string;
}

/** `times` requests of one list query: median and max latency, statuses, the first failure. */
export async function probeList(url: string, key: string, path: string, times: number): Promise<ListProbe> {
  const runs: Timed[] = [];
  for (let i = 0; i < times; i += 1) runs.push(await timedAdmin(url, key, 'GET', path));
  const bad = runs.find((r) => r.status !== 200);
  return {
    path,
    medianMs: median(runs.map((r) => r.ms)),
    maxMs: Math.max(...runs.map((r) => r.ms)),
    statuses: runs.map((r) => r.status),
    ...(bad === undefined ? {} : { failure: `${bad.status} ${codeOf(bad)}` }),
  };
}

/**
 * End `count` tasks: 16 raw WebSocket sessions acquire and complete (the coordinator picks the
 * tasks, oldest first). Setup, not measured. Returns when each task was completed (epoch ms).
 */
export async function completeTasks(stack: Stack, count: number): Promise<Map<string, number>> {
  const done = new Map<string, number>();
  const workers = await Promise.all(
    Array.from({ length: 16 }, (_, i) =>
      RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `ender-${Date.now()}-${i}`, 10_000),
    ),
  );
  try {
    for (const w of workers) w.startHeartbeats(2_000);
    let want = count;
    let none = 0;
    await pool(workers.length, workers.length, async (i) => {
      const w = workers[i];
      if (w === undefined) return;
      for (let n = 0; want > 0 && none < 200; n += 1) {
        want -= 1;
        const g = await w.acquire(`end-${i}-${n}-${Date.now()}`);
        if (!isGrant(g)) {
          want += 1;
          none += 1;
          await sleep(20);
          continue;
        }
        const r = await w.complete(g, `done-${g.taskId}`);
        if (r.type === 'task.completed') done.set(g.taskId, Date.now());
        else want += 1;
      }
    });
  } finally {
    for (const w of workers) w.close();
  }
  return done;
}

export interface PurgeProbe {
  readonly purged: number;
  readonly calls: number;
  readonly totalMs: number;
  readonly medianCallMs: number;
  readonly maxCallMs: number;
  /** Why it stopped before purging everything, if it did. */
  readonly stopped?: string;
}

/**
 * `POST /v1/tasks/purge {state: completed, olderThanMs: 0, limit: 1000}` until `expected` are
 * purged, `more` is false, three calls in a row purge nothing while saying `more`, or `budgetMs`.
 */
export async function probePurge(url: string, key: string, expected: number, budgetMs: number): Promise<PurgeProbe> {
  const calls: number[] = [];
  let purged = 0;
  let idle = 0;
  let stopped: string | undefined;
  const t0 = performance.now();
  while (purged < expected) {
    const r = await timedAdmin(url, key, 'POST', '/v1/tasks/purge', {
      state: 'completed',
      olderThanMs: 0,
      limit: 1000,
    });
    calls.push(r.ms);
    if (r.status !== 200) {
      stopped = `purge answered ${r.status} ${codeOf(r)}`;
      break;
    }
    const body = r.body as { purged: number; more: boolean };
    purged += body.purged;
    idle = body.purged === 0 ? idle + 1 : 0;
    if (!body.more) {
      if (purged < expected) stopped = `purge said no more after ${purged} of ${expected}`;
      break;
    }
    if (idle >= 3) {
      stopped = `3 calls in a row purged nothing but said more (${purged} of ${expected} purged)`;
      break;
    }
    if (performance.now() - t0 > budgetMs) {
      stopped = `stopped after ${Math.round(budgetMs / 1000)} s (${purged} of ${expected} purged)`;
      break;
    }
  }
  return {
    purged,
    calls: calls.length,
    totalMs: performance.now() - t0,
    medianCallMs: median(calls),
    maxCallMs: Math.max(0, ...calls),
    ...(stopped === undefined ? {} : { stopped }),
  };
}

/** The coordinator's `--help` lines that mention retention (none: it has no such setting). */
export function retentionOptions(): string[] {
  const r = spawnSync(process.execPath, [COORDINATOR_MAIN, '--help'], { encoding: 'utf8', timeout: 30_000 });
  return `${r.stdout}\n${r.stderr}`
    .split('\n')
    .filter((line) => /retention|retain/i.test(line))
    .map((line) => line.trim());
}

export interface RetentionProbe {
  readonly sampled: number;
  readonly removed: number;
  /** completion → first 404 of `GET /v1/tasks/<id>`, over the removed part of the sample. */
  readonly medianMs: number;
  readonly maxMs: number;
  readonly waitedMs: number;
}

/** Poll `GET /v1/tasks/<id>` for the sample every 250 ms until each answers 404, or `timeoutMs`. */
export async function probeRetention(
  url: string,
  key: string,
  completedAt: ReadonlyMap<string, number>,
  sampleSize: number,
  timeoutMs: number,
): Promise<RetentionProbe> {
  const ids = [...completedAt.keys()];
  const step = Math.max(1, Math.floor(ids.length / sampleSize));
  const sample = ids.filter((_, i) => i % step === 0).slice(0, sampleSize);
  const gone = new Map<string, number>();
  const t0 = performance.now();
  while (gone.size < sample.length && performance.now() - t0 < timeoutMs) {
    await pool(sample.length, 8, async (i) => {
      const id = sample[i];
      if (id === undefined || gone.has(id)) return;
      const r = await timedAdmin(url, key, 'GET', `/v1/tasks/${encodeURIComponent(id)}`, undefined, 10_000);
      if (r.status === 404) gone.set(id, Date.now() - (completedAt.get(id) ?? Date.now()));
    });
    if (gone.size < sample.length) await sleep(250);
  }
  const ms = [...gone.values()];
  return {
    sampled: sample.length,
    removed: gone.size,
    medianMs: median(ms),
    maxMs: Math.max(0, ...ms),
    waitedMs: performance.now() - t0,
  };
}
