/**
 * The chaos checker: a pure function from a recorded {@link History} to the list of violations.
 * No I/O, no clock. Each rule has a stable name (the `Violation` names below) so a report can say
 * which guarantee broke, and the unit tests feed it bad histories to prove each rule can fail.
 *
 * Uncertainty: a write the worker could not confirm (`unknown`: timed out, connection cut) may or
 * may not have happened. It is never counted as acknowledged, and its presence in the sink is
 * never an error. The sink's decision log is the record of what was decided; the worker logs are
 * the record of what was acknowledged; etcd's history is the record of who owned what.
 */
import { checkCompletion, CompletionViolation } from './checker-completion.js';
import { checkLeaseBounds, LeaseViolation } from './checker-leases.js';
import { checkRegister, RegisterViolation } from './checker-register.js';
import { checkRetries, RetryViolation } from './checker-retries.js';
import { checkResources, ResourceViolation } from './checker-resources.js';
import type { FaultWindow, History, OwnerInterval, SinkDecision, WorkerEvent } from './history.js';
import type { Violation } from './violation.js';

export type { Violation } from './violation.js';

export const ViolationName = {
  /** Per resource, an accepted write carried a lower token than an earlier accepted write. */
  ACCEPTED_TOKEN_REGRESSED: 'accepted-token-regressed',
  /** A write was accepted with a token lower than a fence the sink had already advanced to. */
  STALE_WRITE_ACCEPTED: 'stale-write-accepted',
  /** A write was accepted with a token higher than the fence (a token no grant advanced to). */
  UNISSUED_TOKEN_ACCEPTED: 'unissued-token-accepted',
  /** The fence went down (an advance below the fence accepted, or a fence forgotten after restart). */
  FENCE_REGRESSED: 'fence-regressed',
  /** A worker's write was acknowledged although another holder had been granted a newer token first. */
  STALE_WRITE_ACKNOWLEDGED: 'stale-write-acknowledged',
  /** Two owner keys of one resource alive at the same revision, or one token granted twice. */
  TWO_LIVE_OWNERS: 'two-live-owners',
  /** A worker got a grant that is no owner key in etcd's history. */
  GRANT_NOT_IN_ETCD: 'grant-not-in-etcd',
  /** A grant reached a worker before the sink had advanced the fence to its token. */
  GRANT_BEFORE_FENCE: 'grant-before-fence',
  /** A refusal code that contradicts the fence it was decided against. */
  WRONG_REFUSAL: 'wrong-refusal',
  /** A worker was told "written" but the sink no longer has the result. */
  ACKNOWLEDGED_WRITE_LOST: 'acknowledged-write-lost',
  /** One result id stored twice (a second `written`), or the stored result changed. */
  RESULT_STORED_TWICE: 'result-stored-twice',
  /** A deterministic task's stored result differs from its only correct value. */
  RESULT_MISMATCH: 'result-mismatch',
  /** A task did not complete within the bound after the faults healed (checker-completion.ts). */
  TASK_NOT_COMPLETED: CompletionViolation.TASK_NOT_COMPLETED,
  /** The task completed (the coordinator or a worker's log says so) but the sink has no result for it. */
  COMPLETED_WITHOUT_RESULT: CompletionViolation.COMPLETED_WITHOUT_RESULT,
  /** A process logged at level >= 50 (error/fatal) or an uncaught/unhandled error. */
  PROCESS_LOGGED_ERROR: 'process-logged-error',
  /** A process exited on its own (not by the runner's hand). */
  PROCESS_CRASHED: 'process-crashed',
  /** A named scenario's own expectation did not hold. */
  SCENARIO_EXPECTATION: 'scenario-expectation-failed',
  /** A silent holder's ownership ended later than TTL + margin after it went silent (checker-leases.ts). */
  LEASE_OUTLIVED_BOUND: LeaseViolation.OUTLIVED_BOUND,
  /** An ownership ended with its session before its holder had been silent for the TTL (checker-leases.ts). */
  LEASE_CUT_SHORT: LeaseViolation.CUT_SHORT,
  /** A task was granted more often than its retry policy allows (checker-retries.ts). */
  RETRY_BUDGET_EXCEEDED: RetryViolation.BUDGET_EXCEEDED,
  /** A task was granted before the notBefore in force (backoff, submit delay; checker-retries.ts). */
  GRANTED_BEFORE_NOT_BEFORE: RetryViolation.GRANTED_BEFORE_NOT_BEFORE,
  /** A register write computed from a value the register no longer held (checker-register.ts). */
  LOST_UPDATE: RegisterViolation.LOST_UPDATE,
  /** A process' RSS / open fds grew past the bound, or passed a cap (checker-resources.ts). */
  RESOURCE_RSS_GROWTH: ResourceViolation.RSS_GROWTH,
  RESOURCE_FD_GROWTH: ResourceViolation.FD_GROWTH,
  RESOURCE_CAP_EXCEEDED: ResourceViolation.CAP_EXCEEDED,
} as const;
export type ViolationName = (typeof ViolationName)[keyof typeof ViolationName];

export interface CheckOptions {
  /** Log lines matching these are not violations (known, accepted noise). */
  readonly ignoreLog?: readonly RegExp[];
  /** Cap per violation name (one extra entry counts the rest). Default: no cap. */
  readonly maxPerName?: number;
}

const big = (s: string): bigint => BigInt(s);
const ACCEPTED = new Set(['written', 'replayed']);

export function checkHistory(history: History, options: CheckOptions = {}): Violation[] {
  const out: Violation[] = [
    ...checkDecisions(history),
    ...checkAcknowledgedAfterTakeover(history.events),
    ...checkOwners(history),
    ...checkGrantFencing(history),
    ...checkAcknowledged(history),
    ...checkResults(history),
    ...checkCompletion(history),
    ...checkLogs(history, options.ignoreLog ?? []),
    ...checkExits(history),
    ...checkLeaseBounds(history).violations,
    ...checkRegister(history).violations,
    ...checkRetries(history).violations,
    ...checkResources(history).violations,
  ];
  return options.maxPerName === undefined ? out : capPerName(out, options.maxPerName);
}

function byResource<T extends { resource: string }>(items: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const list = map.get(item.resource);
    if (list === undefined) map.set(item.resource, [item]);
    else list.push(item);
  }
  return map;
}

/** Rules over the sink's own decision log, per resource in commit (seq) order. */
function checkDecisions(history: History): Violation[] {
  const out: Violation[] = [];
  const decisions = [...history.decisions].sort((a, b) => a.seq - b.seq);
  for (const [resource, list] of byResource(decisions)) {
    let fence = 0n; // highest fence reached, as far as the log shows
    let lastAccepted: SinkDecision | undefined;
    for (const d of list) {
      const token = big(d.token);
      const before = big(d.fenceBefore);
      const at = {
        atMs: d.atMs,
        resource,
        token: d.token,
        ...(d.workerId === undefined ? {} : { process: d.workerId }),
      };
      if (before < fence) {
        out.push({
          name: ViolationName.FENCE_REGRESSED,
          message: `seq ${d.seq}: fence of ${resource} was ${fence} and is now ${before}`,
          ...at,
        });
      }
      if (d.kind === 'advance') {
        if (d.outcome === 'advanced' || d.outcome === 'unchanged') {
          if (token < before)
            out.push({
              name: ViolationName.FENCE_REGRESSED,
              message: `seq ${d.seq}: advance of ${resource} to ${token} accepted below fence ${before}`,
              ...at,
            });
          if (token > fence) fence = token;
        } else if (d.outcome === 'STALE_TOKEN' && token >= before) {
          out.push({
            name: ViolationName.WRONG_REFUSAL,
            message: `seq ${d.seq}: advance to ${token} refused STALE_TOKEN although fence is ${before}`,
            ...at,
          });
        }
        if (before > fence) fence = before;
        continue;
      }
      if (before > fence) fence = before;
      if (ACCEPTED.has(d.outcome)) {
        if (token < fence) {
          out.push({
            name: ViolationName.STALE_WRITE_ACCEPTED,
            message: `seq ${d.seq}: write with token ${token} accepted on ${resource} after the fence reached ${fence}`,
            ...at,
          });
        } else if (token > before) {
          out.push({
            name: ViolationName.UNISSUED_TOKEN_ACCEPTED,
            message: `seq ${d.seq}: write with token ${token} accepted on ${resource} above fence ${before}`,
            ...at,
          });
        }
        if (lastAccepted !== undefined && token < big(lastAccepted.token)) {
          out.push({
            name: ViolationName.ACCEPTED_TOKEN_REGRESSED,
            message: `seq ${d.seq}: accepted token ${token} on ${resource} after accepted token ${lastAccepted.token} (seq ${lastAccepted.seq})`,
            ...at,
          });
        }
        lastAccepted = d;
      } else if (
        (d.outcome === 'STALE_TOKEN' && token >= before) ||
        (d.outcome === 'FENCE_CONFLICT' && token <= before)
      ) {
        out.push({
          name: ViolationName.WRONG_REFUSAL,
          message: `seq ${d.seq}: write with token ${token} refused ${d.outcome} although fence was ${before}`,
          ...at,
        });
      }
    }
  }
  return out;
}

/**
 * From worker logs alone (independent of the sink's log): a write whose attempt started after
 * another worker had been granted a newer token for the resource must not be acknowledged. With
 * fence-before-grant, that newer token's fence was durable before its grant was sent.
 */
function checkAcknowledgedAfterTakeover(events: readonly WorkerEvent[]): Violation[] {
  const out: Violation[] = [];
  const grants = events.filter((e) => e.kind === 'grant');
  const attempts = new Map<string, number[]>(); // process|resource|token|resultId -> attempt times
  for (const e of events) {
    if (e.kind !== 'write-attempt') continue;
    const key = `${e.process}|${e.resource}|${e.token}|${e.resultId}`;
    attempts.set(key, [...(attempts.get(key) ?? []), e.atMs]);
  }
  const grantsByResource = byResource(grants);
  for (const e of events) {
    if (e.kind !== 'write' || (e.outcome !== 'written' && e.outcome !== 'replayed')) continue;
    // The last time the worker was seen about to send (a paused worker logs again when it resumes).
    const times = (attempts.get(`${e.process}|${e.resource}|${e.token}|${e.resultId}`) ?? []).filter(
      (t) => t <= e.atMs,
    );
    if (times.length === 0) continue;
    const sentAt = Math.max(...times);
    const newer = (grantsByResource.get(e.resource) ?? []).find((g) => big(g.token) > big(e.token) && g.atMs < sentAt);
    if (newer !== undefined) {
      out.push({
        name: ViolationName.STALE_WRITE_ACKNOWLEDGED,
        message: `${e.process} was told "${e.outcome}" for token ${e.token} on ${e.resource}, sent ${sentAt - newer.atMs} ms after ${newer.process} was granted token ${newer.token}`,
        atMs: e.atMs,
        process: e.process,
        resource: e.resource,
        taskId: e.taskId,
        token: e.token,
      });
    }
  }
  return out;
}

/** At most one live owner per resource at any revision (etcd history), and every grant is an owner key. */
function checkOwners(history: History): Violation[] {
  const out: Violation[] = [];
  const grants = history.events.filter((e) => e.kind === 'grant');
  // One token granted to two different workers is two owners, whatever etcd says.
  const holders = new Map<string, Set<string>>();
  for (const g of grants) {
    const key = `${g.resource}@${g.token}`;
    const set = holders.get(key) ?? new Set<string>();
    set.add(g.workerId);
    holders.set(key, set);
  }
  for (const [key, set] of holders) {
    if (set.size > 1) {
      const [resource = '', token = ''] = key.split('@');
      out.push({
        name: ViolationName.TWO_LIVE_OWNERS,
        message: `token ${token} of ${resource} was granted to ${[...set].join(' and ')}`,
        resource,
        token,
      });
    }
  }
  if (history.owners === undefined) return out;
  for (const [resource, list] of byResource<OwnerInterval>(history.owners)) {
    const sorted = [...list].sort((a, b) => (big(a.token) < big(b.token) ? -1 : 1));
    for (let i = 0; i + 1 < sorted.length; i++) {
      const a = sorted[i]!;
      const b = sorted[i + 1]!;
      if (a.endRevision === undefined || big(a.endRevision) > big(b.token)) {
        out.push({
          name: ViolationName.TWO_LIVE_OWNERS,
          message: `${resource}: owner ${a.token} (${a.workerId ?? '?'}) alive until ${a.endRevision ?? 'the end'} while owner ${b.token} (${b.workerId ?? '?'}) was created`,
          resource,
          token: b.token,
        });
      }
    }
  }
  const known = new Set(history.owners.map((o) => `${o.resource}@${o.token}`));
  for (const g of grants) {
    if (!known.has(`${g.resource}@${g.token}`)) {
      out.push({
        name: ViolationName.GRANT_NOT_IN_ETCD,
        message: `${g.process} was granted ${g.resource} at token ${g.token}, which no owner key in etcd was created at`,
        atMs: g.atMs,
        process: g.process,
        resource: g.resource,
        taskId: g.taskId,
        token: g.token,
      });
    }
  }
  return out;
}

/** Fence before grant: every grant's token was advanced at the sink no later than the worker saw the grant. */
function checkGrantFencing(history: History): Violation[] {
  const out: Violation[] = [];
  const advancedAt = new Map<string, number>(); // resource@token -> earliest advance decision
  const refusedFenceConflict = new Map<string, SinkDecision>();
  for (const d of history.decisions) {
    const key = `${d.resource}@${d.token}`;
    if (d.kind === 'advance' && (d.outcome === 'advanced' || d.outcome === 'unchanged')) {
      const prev = advancedAt.get(key);
      if (prev === undefined || d.atMs < prev) advancedAt.set(key, d.atMs);
    }
    if (d.kind === 'write' && d.outcome === 'FENCE_CONFLICT' && !refusedFenceConflict.has(key))
      refusedFenceConflict.set(key, d);
  }
  const seen = new Set<string>();
  for (const g of history.events) {
    if (g.kind !== 'grant') continue;
    const key = `${g.resource}@${g.token}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const base = { process: g.process, resource: g.resource, taskId: g.taskId, token: g.token };
    const conflict = refusedFenceConflict.get(key);
    if (conflict !== undefined) {
      out.push({
        name: ViolationName.GRANT_BEFORE_FENCE,
        message: `a write with granted token ${g.token} on ${g.resource} found the fence at ${conflict.fenceBefore} (FENCE_CONFLICT): the grant outran its advance`,
        atMs: conflict.atMs,
        ...base,
      });
      continue;
    }
    if (!history.decisionsComplete) continue;
    const at = advancedAt.get(key);
    if (at === undefined || at > g.atMs) {
      out.push({
        name: ViolationName.GRANT_BEFORE_FENCE,
        message:
          at === undefined
            ? `${g.process} was granted ${g.resource} at token ${g.token}, which the sink never advanced to`
            : `${g.process} logged the grant of ${g.resource} at token ${g.token} ${at - g.atMs} ms before the sink advanced to it`,
        atMs: g.atMs,
        ...base,
      });
    }
  }
  return out;
}

/** Every write a worker was told landed is still at the sink (after any number of sink crashes). */
function checkAcknowledged(history: History): Violation[] {
  const out: Violation[] = [];
  const stored = new Map(history.finalResults.map((r) => [`${r.resource}|${r.resultId}`, r]));
  const accepted = new Set(
    history.decisions
      .filter((d) => d.kind === 'write' && ACCEPTED.has(d.outcome))
      .map((d) => `${d.resource}|${d.resultId ?? ''}|${d.token}`),
  );
  for (const e of history.events) {
    if (e.kind !== 'write' || (e.outcome !== 'written' && e.outcome !== 'replayed')) continue;
    const base = { atMs: e.atMs, process: e.process, resource: e.resource, taskId: e.taskId, token: e.token };
    if (!stored.has(`${e.resource}|${e.resultId}`)) {
      out.push({
        name: ViolationName.ACKNOWLEDGED_WRITE_LOST,
        message: `${e.process} was told "${e.outcome}" for ${e.resource}/${e.resultId} (token ${e.token}), the sink has no such result`,
        ...base,
      });
    } else if (history.decisionsComplete && !accepted.has(`${e.resource}|${e.resultId}|${e.token}`)) {
      out.push({
        name: ViolationName.ACKNOWLEDGED_WRITE_LOST,
        message: `${e.process} was told "${e.outcome}" for ${e.resource}/${e.resultId} (token ${e.token}), the decision log has no accepted write for it`,
        ...base,
      });
    }
  }
  return out;
}

/** Each result id stored once; replays identical; deterministic results equal their only value. */
function checkResults(history: History): Violation[] {
  const out: Violation[] = [];
  const firstWritten = new Map<string, SinkDecision>();
  for (const d of [...history.decisions].sort((a, b) => a.seq - b.seq)) {
    if (d.kind !== 'write' || d.outcome !== 'written') continue;
    const key = `${d.resource}|${d.resultId ?? ''}`;
    const first = firstWritten.get(key);
    if (first === undefined) firstWritten.set(key, d);
    else
      out.push({
        name: ViolationName.RESULT_STORED_TWICE,
        message: `${d.resource}/${d.resultId ?? '?'} written at seq ${first.seq} (token ${first.token}) and again at seq ${d.seq} (token ${d.token})`,
        atMs: d.atMs,
        resource: d.resource,
        token: d.token,
      });
  }
  const tasks = new Map(history.tasks.map((t) => [t.taskId, t]));
  for (const r of history.finalResults) {
    const first = firstWritten.get(`${r.resource}|${r.resultId}`);
    if (history.decisionsComplete && first !== undefined && first.token !== r.token) {
      out.push({
        name: ViolationName.RESULT_STORED_TWICE,
        message: `${r.resource}/${r.resultId} was first written with token ${first.token} but now holds token ${r.token}`,
        resource: r.resource,
        token: r.token,
      });
    }
    const taskId = r.resultId.startsWith('task:') ? r.resultId.slice('task:'.length) : undefined;
    const task = taskId === undefined ? undefined : tasks.get(taskId);
    if (task?.deterministic === true && canonical(task.expected) !== canonical(r.payload)) {
      out.push({
        name: ViolationName.RESULT_MISMATCH,
        message: `task ${task.taskId}: stored ${canonical(r.payload)}, expected ${canonical(task.expected)}`,
        resource: r.resource,
        taskId: task.taskId,
        token: r.token,
      });
    }
  }
  return out;
}

/** No process logged level >= 50 or an uncaught / unhandled error. */
/**
 * Error lines that are the right report of a fault the runner injected: excused while such a fault
 * is active on that process' store (and `slackMs` after: pooled connections broken by it are found
 * on their next use). A sink whose PostgreSQL was crashed or cut off, or whose disk is full, logs
 * "batch commit failed" for each batch it could not commit (and answers 503). A coordinator that
 * had no answer from etcd for ETCD_GIVE_UP_MS logs "etcd unreachable" once (level 50: it hands its
 * sessions to peers and refuses hellos) — the right report while an etcd member is paused, killed
 * or cut off, or the coordinator's own links or process are: excused during such a fault and 5 s
 * after (a killed member restarting, the give-up time, a probe in flight when the fault healed).
 */
export const FAULT_REPORTS: readonly {
  readonly pattern: RegExp;
  readonly caused: (process: string, fault: FaultWindow) => boolean;
  readonly slackMs: number;
}[] = [
  {
    pattern: /"msg":"batch commit failed"/,
    caused: (p, f) =>
      f.targets.some((t) => t === 'postgres' || t === `${p}->postgres`) ||
      (f.kind === 'disk-full' && f.targets.includes(p)),
    slackMs: 10_000,
  },
  {
    pattern: /"msg":"etcd unreachable: handing sessions to peers/,
    caused: (p, f) =>
      f.kind !== 'clock-jump' &&
      f.kind !== 'self-pause' &&
      f.targets.some((t) => t.split('->').some((end) => end === p || end.startsWith('etcd-'))),
    slackMs: 5_000,
  },
];

/** No process logged level >= 50 or an uncaught / unhandled error (unless it reports an injected fault). */
function checkLogs(history: History, ignore: readonly RegExp[]): Violation[] {
  const out: Violation[] = [];
  const excused = (process: string, line: string): boolean => {
    const logged = logTime(line);
    if (logged === undefined) return false;
    const hostTimes = hostTimesOf(history, process, logged);
    return FAULT_REPORTS.some(
      (r) =>
        r.pattern.test(line) &&
        history.faults.some(
          (f) =>
            r.caused(process, f) &&
            hostTimes.some((at) => f.startMs <= at && at <= (f.endMs ?? history.endedAtMs) + r.slackMs),
        ),
    );
  };
  for (const log of history.logs) {
    for (const line of log.text.split('\n')) {
      if (line.trim() === '') continue;
      const finding = logFinding(line);
      if (finding === undefined || ignore.some((re) => re.test(line)) || excused(log.process, line)) continue;
      out.push({
        name: ViolationName.PROCESS_LOGGED_ERROR,
        message: `${log.process}: ${finding.slice(0, 300)}`,
        process: log.process,
        ...(logTime(line) === undefined ? {} : { atMs: logTime(line) }),
      });
    }
  }
  return out;
}

/** The problem a log line reports, if any: pino level >= 50, or an uncaught/unhandled error. */
export function logFinding(line: string): string | undefined {
  if (line.startsWith('{')) {
    try {
      const entry = JSON.parse(line) as { level?: unknown; msg?: unknown; err?: { message?: unknown } };
      if (typeof entry.level === 'number' && entry.level >= 50) {
        const err = typeof entry.err?.message === 'string' ? `: ${entry.err.message}` : '';
        return `level ${entry.level} "${String(entry.msg)}"${err}`;
      }
    } catch {
      // not JSON after all; fall through to the text rule
    }
  }
  return /uncaught|unhandled/i.test(line) ? line : undefined;
}

/**
 * The host times a log time of `process` may stand for: itself, or for a process under a faked
 * wall clock, minus its standing offset, or minus the offset plus one of its clock jumps (the line
 * may have been logged during the jump; `clock of NAME +94 s` in the window's detail).
 */
function hostTimesOf(history: History, process: string, loggedMs: number): number[] {
  const standing = history.clockOffsetsMs?.[process];
  if (standing === undefined) return [loggedMs];
  const jumps = history.faults.flatMap((f) => {
    const m = f.kind === 'clock-jump' && f.targets.includes(process) ? /([+-]\d+) s\b/.exec(f.detail ?? '') : null;
    return m === null ? [] : [Number(m[1]) * 1_000];
  });
  return [loggedMs - standing, ...jumps.map((j) => loggedMs - standing - j)];
}

function logTime(line: string): number | undefined {
  const m = /"time":(\d+)/.exec(line);
  return m === null ? undefined : Number(m[1]);
}

function checkExits(history: History): Violation[] {
  return history.exits
    .filter((e) => !e.expected)
    .map((e) => ({
      name: ViolationName.PROCESS_CRASHED,
      message: `${e.process} exited by itself (code ${e.code ?? '-'}, signal ${e.signal ?? '-'})`,
      atMs: e.atMs,
      process: e.process,
    }));
}

/** Canonical JSON (sorted keys), for comparing payloads. */
export function canonical(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

function capPerName(violations: Violation[], max: number): Violation[] {
  const counts = new Map<string, number>();
  const out: Violation[] = [];
  for (const v of violations) {
    const n = (counts.get(v.name) ?? 0) + 1;
    counts.set(v.name, n);
    if (n <= max) out.push(v);
  }
  for (const [name, n] of counts) {
    if (n > max) out.push({ name, message: `${n - max} more ${name} violations not listed` });
  }
  return out;
}

/** Violation counts by name. */
export function countByName(violations: readonly Violation[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of violations) counts[v.name] = (counts[v.name] ?? 0) + 1;
  return counts;
}
