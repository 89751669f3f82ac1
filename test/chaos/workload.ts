/**
 * The workload: seeded task specs (deterministic and non-deterministic payloads, some asking the
 * worker to pause between computing and writing), submission through the admin API (idempotent,
 * retried until definite), and polling of task states.
 */
import type { ChaosCluster } from '../harness/chaos-cluster.js';
import type { FinalTask, RetrySpec, TaskRecord } from './history.js';
import { nowMs } from './nemesis.js';
import type { Prng } from './prng.js';

export interface TaskSpec {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: {
    readonly n: number;
    readonly deterministic: boolean;
    readonly computeMs: number;
    readonly pauseMs: number;
    /** A register task: read the resource's value at the sink, write value + 1 (see checker-register.ts). */
    readonly register?: boolean;
    /** The handler throws (a retryable error) on attempts 1..failAttempts (see checker-retries.ts). */
    readonly failAttempts?: number;
  };
  /** The submit's retry policy, complete (every field given, so no installation default is involved). */
  readonly retry?: RetrySpec;
  /** The submit's delay: not grantable before submit + this. */
  readonly delayMs?: number;
}

/** Mirrors chaos-handler.mjs: the only correct result of a deterministic task. */
export function expectedResult(spec: TaskSpec): unknown {
  return { taskId: spec.taskId, resource: spec.resource, value: spec.payload.n * spec.payload.n + 7 };
}

export interface WorkloadShape {
  readonly tasks: number;
  readonly resources: number;
  /** Share of tasks whose worker pauses before writing (first attempt only). */
  readonly pauseRate: number;
  readonly pauseMinMs: number;
  readonly pauseMaxMs: number;
  readonly deterministicRate?: number;
  readonly taskPrefix: string;
  /** Register tasks (every task increments its resource's register). */
  readonly register?: boolean;
  /** Resource name prefix (default `res/`). */
  readonly resourcePrefix?: string;
  /**
   * Share of tasks with a small retry policy of their own (1–3 attempts, 300–800 ms doubling, 30 %
   * jitter) whose handler fails their first 0..maxAttempts attempts — those failing every attempt
   * must end `failed` — and some submitted with a delay. Default 0.
   */
  readonly retryRate?: number;
}

export function buildTasks(rng: Prng, shape: WorkloadShape): TaskSpec[] {
  return Array.from({ length: shape.tasks }, (_, n) => buildTask(rng, shape, n));
}

function buildTask(rng: Prng, shape: WorkloadShape, n: number): TaskSpec {
  // Drawn for every task so a register workload consumes the seed like the mixed one.
  const deterministic = rng.chance(shape.deterministicRate ?? 0.7);
  const spec: TaskSpec = {
    taskId: `${shape.taskPrefix}-${n}`,
    resource: `${shape.resourcePrefix ?? 'res/'}${n % shape.resources}`,
    payload: {
      n,
      deterministic: deterministic && shape.register !== true,
      computeMs: rng.int(10, 150),
      pauseMs: rng.chance(shape.pauseRate) ? rng.int(shape.pauseMinMs, shape.pauseMaxMs) : 0,
      ...(shape.register === true ? { register: true } : {}),
    },
  };
  if (shape.register === true || !rng.chance(shape.retryRate ?? 0)) return spec;
  const maxAttempts = rng.int(1, 4);
  return {
    ...spec,
    payload: { ...spec.payload, failAttempts: rng.int(0, maxAttempts + 1) },
    retry: { maxAttempts, backoff: { initialMs: rng.int(300, 801), multiplier: 2, maxMs: 2_000, jitter: 0.3 } },
    ...(rng.chance(0.3) ? { delayMs: rng.int(200, 2_001) } : {}),
  };
}

export class Workload {
  readonly records = new Map<string, TaskRecord>();
  readonly states = new Map<string, FinalTask>();
  readonly #cluster: Pick<ChaosCluster, 'admin'>;
  #polling: Promise<boolean> | undefined;

  constructor(cluster: Pick<ChaosCluster, 'admin'>) {
    this.#cluster = cluster;
  }

  /** Submit until the coordinator answers definitely (a timeout may or may not have created it: retry). */
  async submit(spec: TaskSpec, giveUpMs = 60_000): Promise<void> {
    const deadline = nowMs() + giveUpMs;
    const firstSentAtMs = nowMs();
    let last = '';
    while (nowMs() < deadline) {
      try {
        const res = await this.#cluster.admin('POST', '/v1/tasks', spec);
        if (res.status === 200 || res.status === 201) {
          this.records.set(spec.taskId, {
            taskId: spec.taskId,
            resource: spec.resource,
            deterministic: spec.payload.deterministic,
            ...(spec.payload.deterministic ? { expected: expectedResult(spec) } : {}),
            ...(spec.payload.register === true ? { register: true } : {}),
            ...(spec.retry === undefined ? {} : { retry: spec.retry }),
            ...(spec.delayMs === undefined ? {} : { notBeforeMs: firstSentAtMs + spec.delayMs }),
            ...(spec.payload.failAttempts === undefined ? {} : { mayFail: true }),
            submittedAtMs: nowMs(),
          });
          return;
        }
        last = `${res.status} ${JSON.stringify(res.body)}`;
        if (res.status < 500 && res.status !== 503) throw new Error(`submit ${spec.taskId} refused: ${last}`);
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('submit ')) throw err;
        last = err instanceof Error ? err.message : String(err);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`could not submit ${spec.taskId} in ${giveUpMs} ms: ${last}`);
  }

  /**
   * Read every task's state once (paged); returns false if no coordinator answered. One poll at a
   * time (a caller during a poll shares it). Pages in id order and stops past the last submitted
   * id, so tasks that sort after the workload's (the `--backlog`) are never read.
   *
   * Retention: a coordinator may remove ended tasks from etcd. A submitted task absent from a whole
   * pass is marked removed (`removedSeenAtMs`, its last state seen kept); the checker then judges
   * its end from the workers' logs, etcd's history and the sink — never from a read of the task.
   */
  poll(): Promise<boolean> {
    this.#polling ??= this.#pollOnce().finally(() => {
      this.#polling = undefined;
    });
    return this.#polling;
  }

  async #pollOnce(): Promise<boolean> {
    const startedAt = nowMs();
    let lastId = '';
    for (const id of this.records.keys()) if (id > lastId) lastId = id;
    const seen = new Set<string>();
    let after: string | undefined;
    try {
      for (;;) {
        const q = `/v1/tasks?limit=1000${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`;
        const res = await this.#cluster.admin('GET', q);
        if (res.status !== 200) return false;
        const body = res.body as {
          tasks?: { taskId: string; state: string; result?: { resultId: string; token: string } }[];
          next?: string | null;
        };
        const tasks = body.tasks ?? [];
        const at = nowMs();
        for (const t of tasks) {
          seen.add(t.taskId);
          if (!this.records.has(t.taskId)) continue;
          const prev = this.states.get(t.taskId);
          this.states.set(t.taskId, {
            taskId: t.taskId,
            state: t.state,
            result: t.result,
            completedSeenAtMs: prev?.completedSeenAtMs ?? (this.#ended(t.taskId, t.state) ? at : undefined),
          });
        }
        const last = tasks.at(-1)?.taskId;
        if (body.next === undefined || body.next === null || last === undefined || last >= lastId) break;
        after = body.next;
      }
    } catch {
      return false;
    }
    // A whole pass ran: a task submitted before it began and not listed is gone from etcd.
    const at = nowMs();
    for (const [id, record] of this.records) {
      if (seen.has(id) || record.submittedAtMs >= startedAt) continue;
      const prev = this.states.get(id);
      if (prev?.removedSeenAtMs !== undefined) continue;
      this.states.set(id, {
        taskId: id,
        state: 'removed',
        ...(prev === undefined ? {} : { lastSeenState: prev.state, result: prev.result }),
        completedSeenAtMs: prev?.completedSeenAtMs,
        removedSeenAtMs: at,
      });
    }
    return true;
  }

  completed(): number {
    let n = 0;
    for (const s of this.states.values()) if (s.state === 'completed') n += 1;
    return n;
  }

  /** Tasks that ended `failed` (only a task whose handler fails on purpose may; the checker judges it). */
  failed(): number {
    let n = 0;
    for (const s of this.states.values()) if (s.state === 'failed') n += 1;
    return n;
  }

  /** Completed, or failed for a task whose handler fails on purpose (its budget may run out). */
  #ended(taskId: string, state: string | undefined): boolean {
    return state === 'completed' || (state === 'failed' && this.records.get(taskId)?.mayFail === true);
  }

  allCompleted(taskIds: Iterable<string> = this.records.keys()): boolean {
    for (const id of taskIds) if (!this.#ended(id, this.states.get(id)?.state)) return false;
    return true;
  }

  /** Poll until these tasks have ended (completed, or failed where allowed) or `timeoutMs` passes. */
  async waitCompleted(taskIds: readonly string[] | undefined, timeoutMs: number): Promise<boolean> {
    const deadline = nowMs() + timeoutMs;
    const ids = taskIds ?? [...this.records.keys()];
    while (nowMs() < deadline) {
      await this.poll();
      if (this.allCompleted(ids)) return true;
      await new Promise((r) => setTimeout(r, 300));
    }
    await this.poll();
    return this.allCompleted(ids);
  }

  finalTasks(): FinalTask[] {
    return [...this.records.keys()].map((id) => this.states.get(id) ?? { taskId: id, state: 'unknown' });
  }
}
