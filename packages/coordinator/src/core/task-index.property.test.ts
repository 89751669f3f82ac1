/**
 * TaskIndex against a naive reference: after any sequence of task / owner / hold changes, `select`
 * answers what sorting every pending task by create_revision and filtering would answer, and
 * `ownersOf` lists exactly the session's owners. (The index keeps free tasks in a queue plus a
 * sorted list so that an acquire never walks past owned tasks; this checks that bookkeeping.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import type { TaskRecord } from './task-record.js';
import { entryOf, TaskIndex, type OwnerEntry } from './task-index.js';

/** A task as the reference keeps it: its record and revisions (the index gets its entry). */
interface Stored {
  readonly taskId: string;
  readonly resource: string;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
  readonly record: TaskRecord;
}

const entry = (t: Stored) =>
  entryOf(
    { record: t.record, value: JSON.stringify(t.record), createRevision: t.createRevision, modRevision: t.modRevision },
    DEFAULT_RETRY_POLICY,
  );

type Op =
  | { readonly kind: 'add'; readonly resource: number }
  | { readonly kind: 'addBatch'; readonly resources: readonly number[] }
  | { readonly kind: 'update'; readonly pick: number; readonly change: Change }
  | { readonly kind: 'tick'; readonly ms: number }
  | { readonly kind: 'remove'; readonly pick: number }
  | { readonly kind: 'end'; readonly pick: number; readonly state: 'completed' | 'failed' | 'cancelled' }
  | { readonly kind: 'own'; readonly resource: number; readonly session: number }
  | { readonly kind: 'disown'; readonly resource: number }
  | { readonly kind: 'free'; readonly resource: number }
  | { readonly kind: 'hold'; readonly resource: number }
  | { readonly kind: 'unhold'; readonly resource: number }
  | { readonly kind: 'reset' };

/** What an update changes: a grant's attempt count, the priority, a backoff, an attempt opened or closed. */
type Change =
  | { readonly kind: 'attempt' }
  | { readonly kind: 'priority'; readonly priority: number }
  | { readonly kind: 'delay'; readonly ms: number }
  | { readonly kind: 'open' }
  | { readonly kind: 'close' };

const change: fc.Arbitrary<Change> = fc.oneof(
  fc.constant({ kind: 'attempt' as const }),
  fc.record({ kind: fc.constant('priority' as const), priority: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ kind: fc.constant('delay' as const), ms: fc.integer({ min: 0, max: 300 }) }),
  fc.constant({ kind: 'open' as const }),
  fc.constant({ kind: 'close' as const }),
);

const resource = fc.integer({ min: 0, max: 5 });
const pick = fc.nat(1000);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('add' as const), resource }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('addBatch' as const),
      resources: fc.array(resource, { minLength: 2, maxLength: 4 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('update' as const), pick, change }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 200 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('end' as const),
      pick,
      state: fc.constantFrom('completed' as const, 'failed' as const, 'cancelled' as const),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('own' as const), resource, session: fc.integer({ min: 0, max: 2 }) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('disown' as const), resource }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('free' as const), resource }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('hold' as const), resource }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('unhold' as const), resource }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reset' as const }) },
);

/**
 * Grantable (no attempt open, attempts left, due), highest priority first, then create order.
 * Stable: tasks with one create_revision (one batch txn) keep their arrival order.
 */
function reference(
  pending: ReadonlyMap<string, Stored>,
  owners: ReadonlyMap<string, OwnerEntry>,
  held: ReadonlySet<string>,
  nowMs: number,
) {
  const seen = new Set<string>();
  return [...pending.values()]
    .filter(
      (t) =>
        t.record.open === undefined &&
        t.record.attempts < DEFAULT_RETRY_POLICY.maxAttempts &&
        (t.record.notBeforeMs ?? 0) <= nowMs,
    )
    .sort(
      (a, b) => (b.record.priority ?? 0) - (a.record.priority ?? 0) || (a.createRevision < b.createRevision ? -1 : 1),
    )
    .filter((t) => {
      if (owners.has(t.resource) || held.has(t.resource) || seen.has(t.resource)) return false;
      seen.add(t.resource);
      return true;
    })
    .map((t) => t.taskId);
}

describe('TaskIndex (property)', () => {
  it('selects exactly what a full sort-and-filter would, after any sequence of changes', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 5, maxLength: 60, size: 'max' }), (ops) => {
        let now = 1_000;
        const index = new TaskIndex({ wallClock: () => now });
        const pending = new Map<string, Stored>();
        /** Ended tasks (the retention candidates and the state counts). */
        const ended = new Map<string, Stored>();
        const owners = new Map<string, OwnerEntry>();
        const held = new Set<string>();
        let revision = 1n;
        let n = 0;
        const nth = <T>(m: ReadonlyMap<string, T>, i: number): T | undefined =>
          [...m.values()][i % Math.max(1, m.size)];
        for (const o of ops) {
          revision += 1n;
          switch (o.kind) {
            case 'add':
            case 'addBatch':
              // A batch: several tasks created by one txn, so at one revision, arriving in op order.
              for (const res of o.kind === 'add' ? [o.resource] : o.resources) {
                const taskId = `t${n++}`;
                const r = `r${res}`;
                const task: Stored = {
                  taskId,
                  resource: r,
                  createRevision: revision,
                  modRevision: revision,
                  record: {
                    v: 2,
                    taskId,
                    resource: r,
                    payloadBytes: 1,
                    payloadDigest: 'd',
                    state: 'pending',
                    attempts: 0,
                  },
                };
                pending.set(taskId, task);
                index.applyTask(taskId, entry(task));
              }
              break;
            case 'update': {
              const t = nth(pending, o.pick);
              if (t === undefined) break;
              const c = o.change;
              const { open: _open, ...closed } = t.record;
              const record: TaskRecord =
                c.kind === 'attempt'
                  ? { ...t.record, attempts: t.record.attempts + 1 }
                  : c.kind === 'priority'
                    ? { ...t.record, priority: c.priority }
                    : c.kind === 'delay'
                      ? { ...t.record, notBeforeMs: now + c.ms }
                      : c.kind === 'open'
                        ? { ...t.record, open: { attempt: 1, workerId: 'w', sessionId: 's', startedAtMs: now } }
                        : closed;
              const next = { ...t, modRevision: revision, record };
              pending.set(t.taskId, next);
              index.applyTask(t.taskId, entry(next));
              break;
            }
            case 'end': {
              // Completed, failed or cancelled (ended at `now`); or a retry of an ended one.
              const again = nth(ended, o.pick);
              if (again !== undefined && o.pick % 3 === 0) {
                const retried = {
                  ...again,
                  modRevision: revision,
                  record: { ...again.record, state: 'pending' as const },
                };
                ended.delete(again.taskId);
                pending.set(again.taskId, retried);
                index.applyTask(again.taskId, entry(retried));
                break;
              }
              const t = nth(pending, o.pick);
              if (t === undefined) break;
              const { open: _o, ...rest } = t.record;
              const done = { ...t, modRevision: revision, record: { ...rest, state: o.state, endedAtMs: now } };
              pending.delete(t.taskId);
              ended.set(t.taskId, done);
              index.applyTask(t.taskId, entry(done));
              break;
            }
            case 'tick':
              now += o.ms;
              break;
            case 'remove': {
              const t = nth(pending, o.pick) ?? nth(ended, o.pick);
              if (t === undefined) break;
              pending.delete(t.taskId);
              ended.delete(t.taskId);
              index.applyTask(t.taskId, undefined);
              break;
            }
            case 'own': {
              const r = `r${o.resource}`;
              if (owners.has(r)) break; // an owner key is created only when absent
              const owner = { resource: r, taskId: 'x', sessionId: `s${o.session}`, requestId: 'q', token: revision };
              owners.set(r, owner);
              index.applyOwner(r, owner);
              break;
            }
            case 'disown':
              owners.delete(`r${o.resource}`);
              index.applyOwner(`r${o.resource}`, undefined);
              break;
            case 'free': {
              const owner = owners.get(`r${o.resource}`);
              if (owner === undefined) break;
              owners.delete(owner.resource);
              index.freeOwner(owner.resource, owner.token, revision);
              break;
            }
            case 'hold':
              held.add(`r${o.resource}`);
              index.hold(`r${o.resource}`);
              break;
            case 'unhold':
              held.delete(`r${o.resource}`);
              index.holdUntil(`r${o.resource}`, 0n);
              break;
            case 'reset':
              // As a snapshot read would: not in create order (the index sorts; ties keep their order).
              {
                const order = (a: Stored, b: Stored) =>
                  a.taskId.length - b.taskId.length || (a.taskId < b.taskId ? -1 : 1);
                index.reset(
                  [...pending.values(), ...ended.values()].sort(order).map(entry),
                  [...owners.values()],
                  revision,
                );
                // The snapshot's order is the new arrival order (ties of one create_revision).
                const again = [...pending.values()].sort(order);
                pending.clear();
                for (const t of again) pending.set(t.taskId, t);
              }
              break;
          }
          index.advanceTo(revision - 1n);
          expect(index.select({ limit: 100 }).map((t) => t.taskId)).toEqual(reference(pending, owners, held, now));
          // The next wake-up: the earliest due time among delayed (not parked) tasks.
          const dueTimes = [...pending.values()]
            .filter((t) => t.record.open === undefined && t.record.attempts < DEFAULT_RETRY_POLICY.maxAttempts)
            .map((t) => t.record.notBeforeMs ?? 0)
            .filter((at) => at > now);
          expect(index.nextDueMs()).toBe(dueTimes.length === 0 ? undefined : Math.min(...dueTimes));
          // Ended tasks: exactly the reference's, with their revisions, and counted by state.
          expect([...index.endedTasks()].map((t) => [t.taskId, t.state, t.modRevision]).sort()).toEqual(
            [...ended.values()].map((t) => [t.taskId, t.record.state, t.modRevision]).sort(),
          );
          const counts = { completed: 0, failed: 0, cancelled: 0 };
          for (const t of ended.values()) if (t.record.state !== 'pending') counts[t.record.state] += 1;
          expect(index.stats().ended).toEqual(counts);
          expect(index.stats().pending).toBe(pending.size);
          for (const s of ['s0', 's1', 's2']) {
            const want = [...owners.values()].filter((x) => x.sessionId === s).map((x) => x.resource);
            expect(
              index
                .ownersOf(s)
                .map((x) => x.resource)
                .sort(),
            ).toEqual(want.sort());
          }
        }
      }),
      {
        numRuns: 300,
      },
    );
  });
});
