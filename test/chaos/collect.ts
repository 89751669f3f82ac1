/**
 * Turning what the processes left behind into a {@link History}: worker logs (pure parser below),
 * the sink's decision log (paginated), etcd's history of owner keys (a watch from revision 1), and
 * the final state of tasks and results; `collectHistory` puts them together with the live watch's
 * times and the /proc samples.
 */
import { readFileSync } from 'node:fs';
import { Range } from 'etcd3';
import type { SinkClient } from '@leasehold/sink-client';
import type { ChaosCluster } from '../harness/chaos-cluster.js';
import { BACKLOG_ID_PREFIX } from './backlog.js';
import { DEFAULT_RESOURCE_BOUNDS } from './checker-resources.js';
import { historyEtcdClient, type EtcdClientTls } from './etcd-client.js';
import type {
  AttemptEnd,
  FaultWindow,
  FinalResult,
  History,
  LeaseTiming,
  OwnerInterval,
  ProcessLog,
  RetrySpec,
  SinkDecision,
  TaskVersion,
  WorkerEvent,
  WriteOutcome,
} from './history.js';
import type { LiveOwnerWatch } from './live-watch.js';
import { nowMs, type FaultLog } from './nemesis.js';
import type { Workload } from './workload.js';

interface LogEntry {
  readonly time?: number;
  readonly msg?: string;
  readonly workerId?: string;
  readonly taskId?: string;
  readonly resource?: string;
  readonly token?: string | number;
  readonly resultId?: string;
  readonly outcome?: string;
  readonly code?: string;
  readonly reason?: string;
  readonly pauseMs?: number;
  readonly resumed?: boolean;
}

export interface ParsedWorkerLog {
  readonly events: WorkerEvent[];
  /** Self-pauses of the chaos handler (SIGSTOP in beforeWrite) as fault windows (ids from 0). */
  readonly selfPauses: Omit<FaultWindow, 'id'>[];
}

const REFUSALS = new Set(['STALE_TOKEN', 'FENCE_CONFLICT', 'RESULT_CONFLICT']);

/**
 * Parse one worker's log (all its incarnations). A write attempt with no outcome line becomes an
 * `unknown` write: it may or may not have reached the sink.
 */
export function parseWorkerLog(processName: string, text: string): ParsedWorkerLog {
  const events: WorkerEvent[] = [];
  const selfPauses: Omit<FaultWindow, 'id'>[] = [];
  const open = new Map<string, { resultId: string; atMs: number; taskId: string; workerId: string }>();
  const pausedSince = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let e: LogEntry;
    try {
      e = JSON.parse(line) as LogEntry;
    } catch {
      continue;
    }
    if (e.resource === undefined || e.token === undefined || e.time === undefined) continue;
    const token = String(e.token);
    const key = `${e.resource}@${token}`;
    const base = {
      atMs: e.time,
      process: processName,
      workerId: e.workerId ?? processName,
      taskId: e.taskId ?? open.get(key)?.taskId ?? '',
      resource: e.resource,
      token,
    };
    switch (e.msg) {
      case 'lease granted':
        events.push({ kind: 'grant', ...base });
        break;
      case 'chaos: write attempt': {
        const resultId = e.resultId ?? `task:${base.taskId}`;
        events.push({ kind: 'write-attempt', ...base, resultId });
        open.set(key, { resultId, atMs: e.time, taskId: base.taskId, workerId: base.workerId });
        if (e.resumed === true) {
          const since = pausedSince.get(key);
          if (since !== undefined)
            selfPauses.push({ kind: 'self-pause', targets: [processName], startMs: since, endMs: e.time });
          pausedSince.delete(key);
        }
        break;
      }
      case 'chaos: self-pause':
        pausedSince.set(key, e.time);
        break;
      case 'result written':
        events.push({
          kind: 'write',
          ...base,
          resultId: e.resultId ?? open.get(key)?.resultId ?? `task:${base.taskId}`,
          outcome: e.outcome === 'replayed' ? 'replayed' : 'written',
        });
        open.delete(key);
        break;
      case 'write refused by the sink':
        events.push({
          kind: 'write',
          ...base,
          resultId: open.get(key)?.resultId ?? `task:${base.taskId}`,
          outcome: (REFUSALS.has(e.code ?? '') ? e.code : 'unknown') as WriteOutcome,
        });
        open.delete(key);
        break;
      case 'task completed':
        events.push({ kind: 'complete', ...base, ...(e.resultId === undefined ? {} : { resultId: e.resultId }) });
        break;
      case 'lease lost; task left to the next holder':
        events.push({ kind: 'lost', ...base, reason: e.reason ?? '' });
        break;
      default:
        break;
    }
  }
  for (const [key, o] of open) {
    const at = key.lastIndexOf('@');
    events.push({
      kind: 'write',
      atMs: o.atMs,
      process: processName,
      workerId: o.workerId,
      taskId: o.taskId,
      resource: key.slice(0, at),
      token: key.slice(at + 1),
      resultId: o.resultId,
      outcome: 'unknown',
    });
  }
  for (const [key, since] of pausedSince) {
    // Stopped and never resumed (killed while stopped, or still stopped at the end).
    selfPauses.push({ kind: 'self-pause', targets: [processName], startMs: since, endMs: undefined, detail: key });
  }
  events.sort((a, b) => a.atMs - b.atMs);
  return { events, selfPauses };
}

/** The whole decision log; `complete` is false when the sink pruned its beginning. */
export async function readDecisions(client: SinkClient): Promise<{ decisions: SinkDecision[]; complete: boolean }> {
  const decisions: SinkDecision[] = [];
  let after = 0;
  let complete = true;
  for (;;) {
    const page = await client.decisions(after, 1000);
    if (after === 0 && page.oldestRetained > 1) complete = false;
    for (const d of page.decisions) decisions.push({ ...d });
    if (page.decisions.length === 0 || page.next === after) break;
    after = page.next;
  }
  return { decisions, complete };
}

/** The fields of a stored task record the retry rules read (coordinator/src/core/records.ts). */
interface StoredTask {
  readonly taskId?: string;
  readonly state?: string;
  readonly lastEvent?: string;
  readonly attempts?: number;
  readonly notBeforeMs?: number;
  readonly open?: { attempt: number; workerId: string; startedAtMs: number };
  /** Layout v1: the last ended attempts inside the record. */
  readonly history?: AttemptEnd[];
  /** Layout v2: the attempt that ended last (each write that ends one carries it). */
  readonly last?: AttemptEnd;
}

/** One write of a task record as a {@link TaskVersion}: `seen` = the attempt tokens earlier versions listed. */
export function taskVersionOf(revision: string, value: string, seen: Set<string>): TaskVersion | undefined {
  let r: StoredTask;
  try {
    r = JSON.parse(value) as StoredTask;
  } catch {
    return undefined;
  }
  if (r.taskId === undefined) return undefined;
  const ended: AttemptEnd[] = [];
  for (const h of [...(r.history ?? []), ...(r.last === undefined ? [] : [r.last])]) {
    if (seen.has(h.token)) continue;
    seen.add(h.token);
    ended.push({
      attempt: h.attempt,
      workerId: h.workerId,
      token: h.token,
      outcome: h.outcome,
      startedAtMs: h.startedAtMs,
      endedAtMs: h.endedAtMs,
    });
  }
  return {
    taskId: r.taskId,
    revision,
    state: r.state ?? '?',
    lastEvent: r.lastEvent,
    attempts: r.attempts ?? 0,
    ...(r.notBeforeMs === undefined ? {} : { notBeforeMs: r.notBeforeMs }),
    ...(r.open === undefined
      ? {}
      : { open: { attempt: r.open.attempt, workerId: r.open.workerId, startedAtMs: r.open.startedAtMs } }),
    ended,
  };
}

/**
 * Every owner key's life and every write of every task record, from etcd's history: a watch over
 * `<prefix>owners/` … `<prefix>tasks/` (up to the `--backlog`) from revision 1. An owner key deleted at the revision its
 * session key was deleted ended with its session (expiry or close), not by itself (complete,
 * release, cancel). Returns undefined if the history cannot be read (compacted, etcd down).
 */
export async function readEtcdHistory(
  endpoints: readonly string[],
  prefix: string,
  tls?: EtcdClientTls,
  idleMs = 1_000,
  timeoutMs = 20_000,
): Promise<{ owners: OwnerInterval[]; taskVersions: TaskVersion[] } | undefined> {
  const client = historyEtcdClient(endpoints, tls);
  const ownersPrefix = `${prefix}owners/`;
  const tasksPrefix = `${prefix}tasks/`;
  const live = new Map<string, { token: string; workerId?: string; taskId?: string; sessionId?: string }>();
  const done: OwnerInterval[] = [];
  const taskVersions: TaskVersion[] = [];
  const seenAttempts = new Map<string, Set<string>>();
  const sessionEnds = new Set<string>();
  const sessionsPrefix = `${prefix}sessions/`;
  try {
    const head = await client.get('leasehold-chaos-probe').exec();
    const target = BigInt(head.header.revision);
    const watcher = await client
      .watch()
      // Up to the backlog (its ids sort last among the task keys): it is never judged.
      .inRange(new Range(ownersPrefix, `${tasksPrefix}${BACKLOG_ID_PREFIX}`))
      .startRevision('1')
      .create();
    let last = Date.now();
    let seen = 0n;
    const state = { failed: false };
    watcher.on('error', () => {
      state.failed = true;
    });
    watcher.on('data', (res: { header: { revision: string } }) => {
      last = Date.now();
      const rev = BigInt(res.header.revision);
      if (rev > seen) seen = rev;
    });
    watcher.on('put', (kv) => {
      last = Date.now();
      const key = kv.key.toString();
      if (key.startsWith(tasksPrefix)) {
        const id = key.slice(tasksPrefix.length);
        const seen = seenAttempts.get(id) ?? new Set<string>();
        seenAttempts.set(id, seen);
        const v = taskVersionOf(kv.mod_revision, kv.value.toString(), seen);
        if (v !== undefined) taskVersions.push(v);
        return;
      }
      if (!key.startsWith(ownersPrefix)) return;
      const resource = kv.key.toString().slice(ownersPrefix.length);
      const token = kv.create_revision;
      const current = live.get(resource);
      if (current?.token === token) return; // an update of the same owner key
      if (current !== undefined) done.push({ resource, ...current, endRevision: undefined });
      let record: { workerId?: string; taskId?: string; sessionId?: string } = {};
      try {
        record = JSON.parse(kv.value.toString()) as { workerId?: string; taskId?: string; sessionId?: string };
      } catch {
        // not JSON: keep the interval without names
      }
      live.set(resource, {
        token,
        ...(record.workerId === undefined ? {} : { workerId: record.workerId }),
        ...(record.taskId === undefined ? {} : { taskId: record.taskId }),
        ...(record.sessionId === undefined ? {} : { sessionId: record.sessionId }),
      });
    });
    watcher.on('delete', (kv) => {
      last = Date.now();
      if (kv.key.toString().startsWith(tasksPrefix)) return; // purged
      if (kv.key.toString().startsWith(sessionsPrefix)) {
        sessionEnds.add(kv.mod_revision);
        return;
      }
      const resource = kv.key.toString().slice(ownersPrefix.length);
      const current = live.get(resource);
      if (current === undefined) return;
      done.push({ resource, ...current, endRevision: kv.mod_revision });
      live.delete(resource);
    });
    const deadline = Date.now() + timeoutMs;
    // Historical events arrive in a burst; stop once etcd has caught up to `target` and gone quiet.
    while (Date.now() < deadline && !state.failed && !(seen >= target && Date.now() - last > idleMs)) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await watcher.cancel();
    if (state.failed || seen < target) return undefined;
    for (const [resource, o] of live) done.push({ resource, ...o, endRevision: undefined });
    const owners = done.map((o) =>
      o.endRevision === undefined ? o : { ...o, endedWithSession: sessionEnds.has(o.endRevision) },
    );
    return { owners, taskVersions };
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

/** Every stored result of these resources. */
export async function readResults(client: SinkClient, resources: readonly string[]): Promise<FinalResult[]> {
  const out: FinalResult[] = [];
  for (const resource of resources) {
    const view = await client.getResource(resource);
    for (const r of view.results) {
      out.push({
        resource,
        resultId: r.resultId,
        token: r.token.toString(),
        workerId: r.workerId,
        payload: r.payload,
      });
    }
  }
  return out;
}

/** Everything the run left behind, as one {@link History}. */
export async function collectHistory(
  cluster: ChaosCluster,
  workload: Workload,
  faults: FaultLog,
  startedAtMs: number,
  healedAtMs: number,
  completionBoundMs: number,
  extra: {
    watch: LiveOwnerWatch | undefined;
    lease: LeaseTiming;
    resources?: History['resources'];
    /** The installation's retry policy when the runner configured it (undefined for a target). */
    retryDefaults?: RetrySpec;
    wallClocksFaked: boolean;
    clockOffsetsMs?: Readonly<Record<string, number>>;
    /** How long the replay of etcd's history may take (default 20 s; a `--backlog` adds to it). */
    etcdHistoryTimeoutMs?: number;
  },
): Promise<History> {
  const logs: ProcessLog[] = [];
  const events = [];
  const selfPauses: Omit<FaultWindow, 'id'>[] = [];
  for (const p of cluster.processes.values()) {
    if (p.role === 'etcd' || p.role === 'postgres' || p.logPath === undefined) continue;
    let text = '';
    try {
      text = readFileSync(p.logPath, 'utf8');
    } catch {
      continue; // never started
    }
    logs.push({ process: p.name, text });
    if (p.role === 'worker') {
      const parsed = parseWorkerLog(p.name, text);
      events.push(...parsed.events);
      selfPauses.push(...parsed.selfPauses);
    }
  }
  const { decisions, complete } = await readDecisions(cluster.sinkClient);
  const etcdHistory = await readEtcdHistory(
    cluster.etcdEndpoints,
    cluster.prefix,
    cluster.clientTls?.etcd,
    1_000,
    extra.etcdHistoryTimeoutMs ?? 20_000,
  );
  const owners = etcdHistory?.owners;
  const submitted = new Set(workload.records.keys());
  const resources = [...new Set([...workload.records.values()].map((t) => t.resource))];
  const finalResults = await readResults(cluster.sinkClient, resources);
  const windows = faults.all();
  let id = windows.reduce((m, w) => Math.max(m, w.id), 0);
  const watch = extra.watch;
  return {
    startedAtMs,
    endedAtMs: nowMs(),
    healedAtMs,
    completionBoundMs,
    tasks: [...workload.records.values()],
    events: events.sort((a, b) => a.atMs - b.atMs),
    faults: [...windows, ...selfPauses.map((w) => ({ ...w, id: ++id }))].sort((a, b) => a.startMs - b.startMs),
    decisions,
    decisionsComplete: complete,
    owners:
      owners === undefined || watch === undefined
        ? owners
        : owners.map((o) => ({ ...o, startSeenMs: watch.seenAt(o.token), endSeenMs: watch.seenAt(o.endRevision) })),
    finalTasks: workload.finalTasks(),
    taskVersions: etcdHistory?.taskVersions.filter((v) => submitted.has(v.taskId)),
    ...(extra.retryDefaults === undefined ? {} : { retryDefaults: extra.retryDefaults }),
    wallClocksFaked: extra.wallClocksFaked,
    ...(extra.clockOffsetsMs === undefined ? {} : { clockOffsetsMs: extra.clockOffsetsMs }),
    finalResults,
    logs,
    exits: [...cluster.exits],
    ...(watch === undefined ? {} : { lease: extra.lease }),
    ...(extra.resources === undefined ? {} : { resources: extra.resources, resourceBounds: DEFAULT_RESOURCE_BOUNDS }),
  };
}
