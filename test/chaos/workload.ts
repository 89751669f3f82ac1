/**
 * The workload: seeded task specs (deterministic and non-deterministic payloads, some asking the
 * worker to pause between computing and writing), submission through the admin API (idempotent,
 * retried until definite), and polling of task states.
 */
import type { ChaosCluster } from '../harness/chaos-cluster.js';
import type { FinalTask, TaskRecord } from './history.js';
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
  };
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
}

export function buildTasks(rng: Prng, shape: WorkloadShape): TaskSpec[] {
  return Array.from({ length: shape.tasks }, (_, n) => buildTask(rng, shape, n));
}

function buildTask(rng: Prng, shape: WorkloadShape, n: number): TaskSpec {
  // Drawn for every task so a register workload consumes the seed like the mixed one.
  const deterministic = rng.chance(shape.deterministicRate ?? 0.7);
  return {
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
}

export class Workload {
  readonly records = new Map<string, TaskRecord>();
  readonly states = new Map<string, FinalTask>();
  readonly #cluster: ChaosCluster;

  constructor(cluster: ChaosCluster) {
    this.#cluster = cluster;
  }

  /** Submit until the coordinator answers definitely (a timeout may or may not have created it: retry). */
  async submit(spec: TaskSpec, giveUpMs = 60_000): Promise<void> {
    const deadline = nowMs() + giveUpMs;
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

  /** Read every task's state once (paged); returns false if no coordinator answered. */
  async poll(): Promise<boolean> {
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
          if (!this.records.has(t.taskId)) continue;
          const prev = this.states.get(t.taskId);
          this.states.set(t.taskId, {
            taskId: t.taskId,
            state: t.state,
            result: t.result,
            completedSeenAtMs: prev?.completedSeenAtMs ?? (t.state === 'completed' ? at : undefined),
          });
        }
        if (body.next === undefined || body.next === null || tasks.length === 0) return true;
        after = body.next;
      }
    } catch {
      return false;
    }
  }

  completed(): number {
    let n = 0;
    for (const s of this.states.values()) if (s.state === 'completed') n += 1;
    return n;
  }

  allCompleted(taskIds: Iterable<string> = this.records.keys()): boolean {
    for (const id of taskIds) if (this.states.get(id)?.state !== 'completed') return false;
    return true;
  }

  /** Poll until these tasks are completed or `timeoutMs` passes; returns whether they all completed. */
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
