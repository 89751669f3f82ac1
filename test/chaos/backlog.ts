/**
 * `--backlog N`: N extra tasks the coordinators hold for the whole run, so the checked workload
 * runs against a coordinator that indexes, snapshots (on every restart the nemesis causes), lists
 * and pages N more tasks — chaos at scale (issue 23).
 *
 * Each backlog task is small (`{ backlog: true, n }`), on a resource of its own (`zz-backlog/<n>`,
 * never one the checked workload uses), at the lowest priority and **delayed** by
 * {@link BACKLOG_DELAY_MS}, far past any run's end: it stays pending (state `delayed`) and no worker
 * is ever granted one, so the checked workload completes and is judged exactly as without a
 * backlog. A grantable backlog (priority alone) would be worked off by the run's workers in
 * seconds and so be neither kept nor judged; a delayed task costs the coordinator what a pending
 * one does in etcd, in the index, in a restart's snapshot and in every page of a list, purge or
 * retention pass.
 *
 * Ids are `zz-backlog-<n>`: they sort after every id the workloads use, so the workload's poll
 * (which pages in id order) stops before it reaches them, and a count of the backlog pages from
 * its prefix. Submitted in batches of ≤ 1000 (`POST /v1/tasks/batch`), a few in flight, each
 * batch sent again until definite — the submit is idempotent by task id.
 */
import { MAX_BATCH_SUBMIT } from '@leasehold/protocol';
import type { History } from './history.js';
import { nowMs } from './nemesis.js';
import type { Violation } from './violation.js';

export const BACKLOG_ID_PREFIX = 'zz-backlog-';
export const BACKLOG_RESOURCE_PREFIX = 'zz-backlog/';
/** 24 h: longer than any run (the soak is 1 h; clock jumps move a coordinator by ≤ 300 s). */
export const BACKLOG_DELAY_MS = 24 * 3_600_000;

export type AdminCall = (
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  timeoutMs?: number,
) => Promise<{ status: number; body: unknown }>;

export interface BacklogTask {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: { readonly backlog: true; readonly n: number };
  readonly priority: 0;
  readonly delayMs: number;
}

export function backlogTask(n: number): BacklogTask {
  return {
    taskId: `${BACKLOG_ID_PREFIX}${n}`,
    resource: `${BACKLOG_RESOURCE_PREFIX}${n}`,
    payload: { backlog: true, n },
    priority: 0,
    delayMs: BACKLOG_DELAY_MS,
  };
}

export const isBacklogTask = (taskId: string): boolean => taskId.startsWith(BACKLOG_ID_PREFIX);

export interface BacklogStats {
  readonly requested: number;
  readonly accepted: number;
  /** Tasks the coordinator answered with something else than 200/201 (e.g. 409). */
  readonly refused: number;
  readonly batches: number;
  /** Batches sent again after a 5xx or a transport failure. */
  readonly retries: number;
  readonly submitMs: number;
  readonly perSecond: number;
  readonly firstRefusal?: string;
  /** Why the first retried batch was sent again (a 5xx body or the transport error). */
  readonly firstRetry?: string;
}

export interface BacklogOptions {
  readonly count: number;
  readonly batch?: number;
  readonly concurrency?: number;
  /** Per request. */
  readonly timeoutMs?: number;
  /** Give a batch up after this long without a definite answer (then the run fails). */
  readonly giveUpMs?: number;
  readonly progress?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Submit the backlog; rejects when a batch got no definite answer within `giveUpMs`. */
export async function submitBacklog(admin: AdminCall, o: BacklogOptions): Promise<BacklogStats> {
  const batch = Math.min(MAX_BATCH_SUBMIT, Math.max(1, o.batch ?? MAX_BATCH_SUBMIT));
  const batches = Math.ceil(o.count / batch);
  const t0 = nowMs();
  let next = 0;
  let accepted = 0;
  let refused = 0;
  let retries = 0;
  let firstRefusal: string | undefined;
  let firstRetry: string | undefined;
  let lastReport = t0;
  const sendBatch = async (b: number) => {
    const tasks = Array.from({ length: Math.min(batch, o.count - b * batch) }, (_, k) => backlogTask(b * batch + k));
    const deadline = nowMs() + (o.giveUpMs ?? 120_000);
    let last = '';
    for (let attempt = 0; nowMs() < deadline; attempt += 1) {
      if (attempt > 0) {
        retries += 1;
        firstRetry ??= last;
        await sleep(Math.min(2_000, 100 * 2 ** attempt));
      }
      try {
        const res = await admin('POST', '/v1/tasks/batch', { tasks }, o.timeoutMs ?? 30_000);
        if (res.status !== 200) {
          last = `${res.status} ${JSON.stringify(res.body).slice(0, 200)}`;
          if (res.status >= 500) continue;
          throw new Error(`backlog batch ${b} refused: ${last}`);
        }
        const results = (res.body as { results?: { status: number; taskId?: string }[] }).results ?? [];
        for (const r of results) {
          if (r.status === 200 || r.status === 201) accepted += 1;
          else {
            refused += 1;
            firstRefusal ??= `${r.taskId ?? '?'}: ${r.status}`;
          }
        }
        return;
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('backlog batch')) throw err;
        last = err instanceof Error ? err.message : String(err);
      }
    }
    throw new Error(`backlog batch ${b}: no definite answer within ${o.giveUpMs ?? 120_000} ms (${last})`);
  };
  await Promise.all(
    Array.from({ length: Math.min(batches, o.concurrency ?? 4) }, async () => {
      while (next < batches) {
        await sendBatch(next++);
        if (o.progress !== undefined && nowMs() - lastReport >= 5_000) {
          lastReport = nowMs();
          o.progress(`[chaos] backlog: ${accepted} of ${o.count} submitted`);
        }
      }
    }),
  );
  const submitMs = nowMs() - t0;
  return {
    requested: o.count,
    accepted,
    refused,
    batches,
    retries,
    submitMs: Math.round(submitMs),
    perSecond: submitMs > 0 ? Math.round((accepted * 1000) / submitMs) : 0,
    ...(firstRefusal === undefined ? {} : { firstRefusal }),
    ...(firstRetry === undefined ? {} : { firstRetry }),
  };
}

export interface BacklogCount {
  /** Backlog tasks listed, by state. */
  readonly byState: Record<string, number>;
  readonly listed: number;
  /** False when the time budget ran out before the last page. */
  readonly complete: boolean;
  readonly ms: number;
}

/**
 * Count the backlog through the admin API (pages of 1000 from its prefix, in id order), within
 * `budgetMs`. The admin API, not etcd: it is what the coordinators still hold, whatever the layout.
 */
export async function countBacklog(admin: AdminCall, budgetMs = 60_000): Promise<BacklogCount> {
  const t0 = nowMs();
  const byState: Record<string, number> = {};
  let listed = 0;
  // `after` is exclusive: the prefix without its last character sorts before every backlog id.
  let after = BACKLOG_ID_PREFIX.slice(0, -1);
  for (;;) {
    if (nowMs() - t0 > budgetMs) return { byState, listed, complete: false, ms: Math.round(nowMs() - t0) };
    const res = await admin('GET', `/v1/tasks?limit=1000&after=${encodeURIComponent(after)}`, undefined, 30_000);
    if (res.status !== 200) throw new Error(`listing the backlog: ${res.status} ${JSON.stringify(res.body)}`);
    const body = res.body as { tasks?: { taskId: string; state: string }[]; next?: string | null };
    const tasks = body.tasks ?? [];
    for (const t of tasks) {
      if (!isBacklogTask(t.taskId)) return { byState, listed, complete: true, ms: Math.round(nowMs() - t0) };
      listed += 1;
      byState[t.state] = (byState[t.state] ?? 0) + 1;
    }
    const last = tasks.at(-1);
    if (body.next === undefined || body.next === null || last === undefined)
      return { byState, listed, complete: true, ms: Math.round(nowMs() - t0) };
    after = body.next;
  }
}

export const BacklogViolation = {
  /** Backlog tasks were granted, or fewer were listed at the end than were submitted. */
  NOT_KEPT: 'backlog-not-kept',
} as const;

/**
 * The backlog stayed what it was meant to be: every submitted task still listed at the end (when
 * the count finished) and none granted to a worker (each is delayed by {@link BACKLOG_DELAY_MS}:
 * a grant would break the submit's `delayMs`).
 */
export function checkBacklogKept(
  stats: BacklogStats,
  atEnd: BacklogCount | undefined,
  history: Pick<History, 'events'>,
): Violation[] {
  const out: Violation[] = [];
  const grants = history.events.filter((e) => e.kind === 'grant' && isBacklogTask(e.taskId));
  for (const g of grants.slice(0, 20)) {
    out.push({
      name: BacklogViolation.NOT_KEPT,
      message: `backlog task ${g.taskId} (delayed ${BACKLOG_DELAY_MS} ms) was granted to ${g.workerId} at token ${g.token}`,
      atMs: g.atMs,
      resource: g.resource,
      taskId: g.taskId,
      token: g.token,
    });
  }
  if (atEnd?.complete === true && atEnd.listed < stats.accepted) {
    out.push({
      name: BacklogViolation.NOT_KEPT,
      message: `${stats.accepted - atEnd.listed} of ${stats.accepted} backlog tasks are gone at the end (listed ${atEnd.listed}: ${JSON.stringify(atEnd.byState)})`,
    });
  }
  return out;
}
