/**
 * The LeaseStore contract: the typed outcome of every atomic operation, one suite run against the
 * store on a real etcd (`lease-store.int.test.ts`) and on the in-memory etcd (`lease-store.test.ts`).
 * Each compare of each transaction has a case here whose outcome changes when the compare is gone.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  abandoned,
  attemptFailed,
  cancelled,
  completed,
  granted as grantedRecord,
  newTask,
  released,
  retried,
} from '../core/lifecycle.js';
import { DEFAULT_RETRY_POLICY, MAX_TASK_HISTORY } from '@leasehold/protocol';
import type { OwnerRecord, SessionRecord } from '../core/records.js';
import type { TaskRecord } from '../core/task-record.js';
import type { KvBackend } from '../etcd/backend.js';
import { KeyLayout } from '../etcd/keys.js';
import { op } from '../etcd/kv.js';
import { KvLeaseStore } from '../etcd/lease-store.js';
import { payloadDigest } from '../payload-digest.js';
import type { GrantJob, NewTask, OpenedSession, StoredTask, StoreEvent } from '../store/port.js';

export interface StoreTarget {
  readonly backend: KvBackend;
  /** Let `ms` pass (memory: move the manual clock; etcd: wait). */
  pass(ms: number): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

const sessionRecord = (workerId: string, coordinatorId = 'c1'): SessionRecord => ({
  v: 1,
  workerId,
  incarnation: 'inc-1',
  coordinatorId,
  ttlMs: 5_000,
});

const ENV = { nowMs: 1_000, random: () => 0.5, defaults: DEFAULT_RETRY_POLICY };

const PAYLOAD = { n: 1 };

const taskRecord = (taskId: string, resource: string, payload: unknown = PAYLOAD): TaskRecord =>
  newTask(
    {
      taskId,
      resource,
      payloadBytes: Buffer.byteLength(JSON.stringify(payload)),
      payloadDigest: payloadDigest(payload as never),
      retry: { maxAttempts: 2 },
    },
    ENV,
  );

const newTaskOf = (taskId: string, resource: string, payload: unknown = PAYLOAD): NewTask => ({
  record: taskRecord(taskId, resource, payload),
  payloadJson: JSON.stringify(payload),
});

/** A task record of layout v1, as coordinators before 0.3 wrote it (payload and history inside). */
export function legacyRecord(taskId: string, resource: string, over: Record<string, unknown> = {}): string {
  return JSON.stringify({
    v: 1,
    taskId,
    resource,
    payload: { legacy: taskId },
    state: 'pending',
    attempts: 0,
    priority: 0,
    retry: DEFAULT_RETRY_POLICY,
    lastEvent: 'submitted',
    atMs: 1_000,
    createdAtMs: 1_000,
    ...over,
  });
}

export function describeStoreContract(name: string, openTarget: () => Promise<StoreTarget>): void {
  describe(`LeaseStore contract: ${name}`, () => {
    let target: StoreTarget;
    let store: KvLeaseStore;

    beforeEach(async () => {
      target = await openTarget();
      counter += 1;
      store = new KvLeaseStore(
        target.backend,
        new KeyLayout(`store-contract/${process.pid}-${Date.now()}-${counter}/`),
      );
    });
    afterEach(async () => {
      await target.close();
    });

    async function submit(taskId: string, resource: string, payload: unknown = PAYLOAD) {
      const res = await store.submitTasks([newTaskOf(taskId, resource, payload)]);
      expect(res.kind).toBe('created');
      const task = await store.task(taskId);
      if (task === undefined) throw new Error('task not stored');
      return task;
    }

    async function open(workerId = 'w1'): Promise<OpenedSession> {
      return store.openSession(sessionRecord(workerId), 10);
    }

    function job(
      session: OpenedSession,
      task: Pick<StoredTask, 'record' | 'modRevision'>,
      requestId: string,
    ): GrantJob {
      const owner: OwnerRecord = {
        v: 1,
        taskId: task.record.taskId,
        sessionId: session.sessionId,
        workerId: 'w1',
        incarnation: 'inc-1',
        requestId,
        attempt: task.record.attempts + 1,
      };
      return {
        sessionId: session.sessionId,
        leaseId: session.leaseId,
        sessionModRevision: session.modRevision,
        requestId,
        task: task.record,
        taskModRevision: task.modRevision,
        next: grantedRecord(task.record, { workerId: 'w1', sessionId: session.sessionId }, ENV.nowMs),
        owner,
      };
    }

    /** The record the grant wrote (what closing its attempt starts from). */
    async function current(taskId: string) {
      const task = await store.task(taskId);
      if (task === undefined) throw new Error(`no task ${taskId}`);
      return task;
    }

    function proofOf(session: OpenedSession, resource: string, g: { token: bigint; requestId: string }) {
      return {
        sessionId: session.sessionId,
        leaseId: session.leaseId,
        resource,
        token: g.token,
        requestId: g.requestId,
      };
    }

    async function grantOne(j: GrantJob) {
      const [settled] = await store.grant([j]);
      if (settled === undefined || !settled.ok) throw new Error(`grant failed: ${JSON.stringify(settled)}`);
      return settled.value;
    }

    async function granted(session: OpenedSession, taskId: string, resource: string, requestId = `q-${taskId}`) {
      const task = await submit(taskId, resource);
      const out = await grantOne(job(session, task, requestId));
      if (out.kind !== 'granted') throw new Error(`expected granted, got ${out.kind}`);
      return { token: out.token, task, requestId };
    }

    describe('sessions', () => {
      it('opens a session on a fresh lease; its key proves who serves it', async () => {
        const s = await open();
        const stored = await store.session(s.sessionId);
        expect(stored).toMatchObject({ sessionId: s.sessionId, leaseId: s.leaseId, modRevision: s.modRevision });
        expect(stored?.record.workerId).toBe('w1');
      });

      it('adopts only at the mod_revision read (a second adoption from the same read is raced)', async () => {
        const s = await open();
        const read = await store.session(s.sessionId);
        if (read === undefined) throw new Error('no session');
        const first = await store.adoptSession(read, { ...read.record, coordinatorId: 'c2' });
        expect(first.kind).toBe('adopted');
        const second = await store.adoptSession(read, { ...read.record, coordinatorId: 'c3' });
        expect(second).toEqual({ kind: 'raced' });
        expect((await store.session(s.sessionId))?.record.coordinatorId).toBe('c2');
      });

      it('ends a session: its owners, holdings and key at one revision; then gone', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const b = await granted(s, 't2', 'r2');
        const held = [
          { resource: 'r1', token: a.token },
          { resource: 'r2', token: b.token },
        ];
        const ended = await store.endSession({ sessionId: s.sessionId, knownModRevision: s.modRevision, held });
        expect(ended.kind).toBe('ended');
        expect(await store.owner('r1')).toBeUndefined();
        expect(await store.owner('r2')).toBeUndefined();
        expect(await store.session(s.sessionId)).toBeUndefined();
        expect(await store.holding(s.sessionId, a.requestId)).toBeUndefined();
        const again = await store.endSession({ sessionId: s.sessionId, knownModRevision: s.modRevision, held });
        expect(again).toEqual({ kind: 'gone' });
      });

      it('does not end a session a peer adopted (moved), nor one whose holdings were under-reported (changed)', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        // Holdings from an index that missed the grant: the holdings compare fails it.
        const lagging = await store.endSession({
          sessionId: s.sessionId,
          knownModRevision: s.modRevision,
          held: [],
          knownUpTo: a.token - 1n,
        });
        expect(lagging).toEqual({ kind: 'changed' });
        // A wrong token for a held owner: the owner compare fails it.
        const wrongToken = await store.endSession({
          sessionId: s.sessionId,
          knownModRevision: s.modRevision,
          held: [{ resource: 'r1', token: a.token + 1000n }],
        });
        expect(wrongToken).toEqual({ kind: 'changed' });
        expect(await store.owner('r1')).toMatchObject({ token: a.token });
        const read = await store.session(s.sessionId);
        if (read === undefined) throw new Error('no session');
        await store.adoptSession(read, { ...read.record, coordinatorId: 'peer' });
        const moved = await store.endSession({
          sessionId: s.sessionId,
          knownModRevision: s.modRevision,
          held: [{ resource: 'r1', token: a.token }],
        });
        expect(moved).toEqual({ kind: 'moved' });
        expect(await store.owner('r1')).toMatchObject({ token: a.token });
      });

      it('closes a session (ending): grants compared on the old mod_revision fail from then on', async () => {
        const s = await open();
        const closed = await store.closeSession({
          sessionId: s.sessionId,
          leaseId: s.leaseId,
          knownModRevision: s.modRevision,
          record: sessionRecord('w1'),
        });
        expect(closed.kind).toBe('closed');
        expect((await store.session(s.sessionId))?.record.ending).toBe(true);
        const task = await submit('t1', 'r1');
        expect(await grantOne(job(s, task, 'q1'))).toEqual({ kind: 'sessionMoved' });
        const twice = await store.closeSession({
          sessionId: s.sessionId,
          leaseId: s.leaseId,
          knownModRevision: s.modRevision,
          record: sessionRecord('w1'),
        });
        expect(twice).toEqual({ kind: 'moved' });
        await store.revokeLease(s.leaseId);
        expect(await store.session(s.sessionId)).toBeUndefined();
        const gone = await store.closeSession({
          sessionId: s.sessionId,
          leaseId: s.leaseId,
          knownModRevision: s.modRevision,
          record: sessionRecord('w1'),
        });
        expect(gone).toEqual({ kind: 'gone' });
      });
    });

    describe('grants', () => {
      it('grants: the token is the owner key create_revision, the task counts the attempt, the request is recorded', async () => {
        const s = await open();
        const { token, requestId } = await granted(s, 't1', 'r1');
        expect(await store.owner('r1')).toMatchObject({ token, modRevision: token, leaseId: s.leaseId });
        expect((await store.task('t1'))?.record.attempts).toBe(1);
        expect((await store.holding(s.sessionId, requestId))?.token).toBe(token);
      });

      it('delivers the payload from the grant txn itself, and splits a batch by payload bytes', async () => {
        const s = await open();
        const big = { pad: 'x'.repeat(700_000) };
        const tasks = await Promise.all(['p1', 'p2', 'p3', 'p4'].map((id, i) => submit(id, `r-${id}`, { ...big, i })));
        const out = await store.grant(tasks.map((t, i) => job(s, t, `q${i}`)));
        const granted = out.map((r) => (r.ok && r.value.kind === 'granted' ? r.value : undefined));
        expect(
          granted.map((g) => (g === undefined ? undefined : (JSON.parse(g.payloadJson ?? 'null') as unknown))),
        ).toEqual([0, 1, 2, 3].map((i) => ({ ...big, i })));
        // 4 × 700 KB of payloads do not come back in one reply: more than one txn (revision).
        expect(new Set(granted.map((g) => g?.token)).size).toBeGreaterThan(1);
        const replay = await store.grantedTask('r-p2', 'p2');
        expect(JSON.parse(replay.payloadJson ?? 'null')).toEqual({ ...big, i: 1 });
      });

      it('refuses a second owner of a resource (raced), whoever asks', async () => {
        const s1 = await open('w1');
        const s2 = await open('w2');
        const first = await granted(s1, 't1', 'r1');
        const other = await submit('t2', 'r1');
        const out = await grantOne(job(s2, other, 'q-other'));
        expect(out.kind).toBe('raced');
        expect(await store.owner('r1')).toMatchObject({ token: first.token });
      });

      it('replays the grant of a request id that holds one', async () => {
        const s = await open();
        const { token, task, requestId } = await granted(s, 't1', 'r1');
        const out = await grantOne(job(s, { record: task.record, modRevision: token }, requestId));
        expect(out).toMatchObject({ kind: 'replay', holding: { token } });
      });

      it('refuses a grant compared on a task revision that is no longer current (raced)', async () => {
        const s = await open();
        const task = await submit('t1', 'r1');
        const stale = { record: task.record, modRevision: task.modRevision - 1n };
        expect((await grantOne(job(s, stale, 'q1'))).kind).toBe('raced');
        expect(await store.owner('r1')).toBeUndefined();
      });

      it('refuses a grant for a session served elsewhere or gone (sessionMoved)', async () => {
        const s = await open();
        const task = await submit('t1', 'r1');
        const stale = { ...job(s, task, 'q1'), sessionModRevision: s.modRevision - 1n };
        expect(await grantOne(stale)).toEqual({ kind: 'sessionMoved' });
        await store.revokeLease(s.leaseId);
        expect(await grantOne(job(s, task, 'q1'))).toEqual({ kind: 'sessionMoved' });
        expect(await store.owner('r1')).toBeUndefined();
      });

      it('grants a batch at one revision, and tells per job which failed when one cannot', async () => {
        const s = await open();
        const tasks = await Promise.all(['a', 'b', 'c'].map((id) => submit(id, `r-${id}`)));
        const [ta, tb, tc] = tasks;
        if (ta === undefined || tb === undefined || tc === undefined) throw new Error('tasks');
        const batch = await store.grant([job(s, ta, 'qa'), job(s, tb, 'qb')]);
        const tokens = batch.map((r) => (r.ok && r.value.kind === 'granted' ? r.value.token : undefined));
        expect(tokens[0]).toBeDefined();
        expect(tokens[0]).toBe(tokens[1]);
        const conflict = await submit('d', 'r-a'); // r-a is owned now
        const mixed = await store.grant([job(s, tc, 'qc'), job(s, conflict, 'qd')]);
        expect(mixed.map((r) => (r.ok ? r.value.kind : 'error'))).toEqual(['granted', 'raced']);
      });

      it('abandons an unsent grant closing its attempt (closed): the attempt given back, the task backs off', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const written = await current('t1');
        const next = abandoned(written.record, a.token, 'sink down', ENV);
        const ref = { sessionId: s.sessionId, requestId: a.requestId, resource: 'r1', token: a.token, next };
        // A task record changed since the grant (task compare): only the keys go.
        await store.kv.txn('test', {
          compare: [],
          success: [op.put(store.keys.task('t1'), JSON.stringify(written.record))],
        });
        expect(await store.abandonGrant(ref)).toBe('removed');
        expect((await current('t1')).record.attempts).toBe(1);
        const b = await granted(s, 't2', 'r2');
        const nextB = abandoned((await current('t2')).record, b.token, 'sink down', ENV);
        const refB = { sessionId: s.sessionId, requestId: b.requestId, resource: 'r2', token: b.token, next: nextB };
        // Another owner token (owner compare): nothing is closed.
        expect(await store.abandonGrant({ ...refB, token: b.token + 1n })).toBe('gone');
        expect(await store.abandonGrant(refB)).toBe('closed');
        expect(await store.owner('r2')).toBeUndefined();
        expect((await current('t2')).record).toMatchObject({ attempts: 0, deferrals: 1, lastEvent: 'abandoned' });
      });

      it('abandons an unsent grant (removed), and its holding alone when the owner is gone (forgotten)', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const ref = { sessionId: s.sessionId, requestId: a.requestId, resource: 'r1', token: a.token };
        expect(await store.abandonGrant(ref)).toBe('removed');
        expect(await store.owner('r1')).toBeUndefined();
        expect(await store.holding(s.sessionId, a.requestId)).toBeUndefined();
        expect(await store.abandonGrant(ref)).toBe('gone');
        const b = await granted(s, 't2', 'r2');
        await store.kv.txn('test', { compare: [], success: [op.del(store.keys.owner('r2'))] });
        const refB = { sessionId: s.sessionId, requestId: b.requestId, resource: 'r2', token: b.token };
        expect(await store.abandonGrant(refB)).toBe('forgotten');
        expect(await store.holding(s.sessionId, b.requestId)).toBeUndefined();
      });
    });

    describe('held leases', () => {
      it('releases with the holder proof only; the task is pending again, the attempt given back', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const task = await current('t1');
        const proof = proofOf(s, 'r1', a);
        const job = { ...proof, taskModRevision: task.modRevision, next: released(task.record, a.token, ENV.nowMs) };
        const wrong = [
          { ...job, token: a.token + 1n },
          { ...job, leaseId: '424242' },
          { ...job, requestId: 'q-other' },
          { ...job, taskModRevision: task.modRevision - 1n },
        ];
        for (const p of wrong) {
          const [r] = await store.finish([p]);
          expect(r?.ok && r.value.kind).toBe('notHolder');
        }
        const [ok] = await store.finish([job]);
        expect(ok?.ok && ok.value.kind).toBe('done');
        expect(await store.owner('r1')).toBeUndefined();
        expect((await current('t1')).record).toMatchObject({ state: 'pending', attempts: 0, lastEvent: 'released' });
        const [again] = await store.finish([job]);
        expect(again?.ok && again.value.kind).toBe('notHolder');
      });

      it('refuses to end an attempt whose owner key was rewritten (mod_revision moved)', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const task = await current('t1');
        const owner = await store.owner('r1');
        if (owner === undefined) throw new Error('no owner');
        await store.kv.txn('test', {
          compare: [],
          success: [op.put(store.keys.owner('r1'), JSON.stringify(owner.record), s.leaseId)],
        });
        const [r] = await store.finish([
          { ...proofOf(s, 'r1', a), taskModRevision: task.modRevision, next: released(task.record, a.token, 1) },
        ]);
        expect(r?.ok && r.value.kind).toBe('notHolder');
      });

      it('completes with the holder proof and an unchanged task; records the result', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const task = await current('t1');
        const base = {
          ...proofOf(s, 'r1', a),
          taskModRevision: task.modRevision,
          next: completed(task.record, a.token, 'task:t1', ENV.nowMs),
        };
        const [stale] = await store.finish([{ ...base, taskModRevision: task.modRevision - 1n }]);
        expect(stale?.ok && stale.value.kind).toBe('notHolder');
        const [other] = await store.finish([{ ...base, token: a.token - 1n }]);
        expect(other?.ok && other.value.kind).toBe('notHolder');
        const [done] = await store.finish([base]);
        expect(done?.ok && done.value.kind).toBe('done');
        expect((await current('t1')).record).toMatchObject({
          state: 'completed',
          result: { resultId: 'task:t1', token: a.token.toString() },
          last: { attempt: 1, outcome: 'completed', token: a.token.toString() },
          endedAttempts: 1,
        });
        expect((await store.taskDetail('t1'))?.history).toMatchObject([
          { attempt: 1, outcome: 'completed', token: a.token.toString() },
        ]);
        expect(await store.owner('r1')).toBeUndefined();
      });

      it('fails an attempt: pending after the backoff while attempts are left, then failed', async () => {
        const s = await open();
        const error = { name: 'Boom', message: 'handler threw', retryable: true };
        const a = await granted(s, 't1', 'r1');
        const t1 = await current('t1');
        const [first] = await store.finish([
          {
            ...proofOf(s, 'r1', a),
            taskModRevision: t1.modRevision,
            next: attemptFailed(t1.record, a.token, error, 'failed', ENV),
          },
        ]);
        expect(first?.ok && first.value.kind).toBe('done');
        const retrying = await current('t1');
        expect(retrying.record).toMatchObject({ state: 'pending', attempts: 1, lastEvent: 'retrying' });
        expect(retrying.record.notBeforeMs).toBeGreaterThan(ENV.nowMs);
        const b = await grantOne(job(s, retrying, 'q-again'));
        if (b.kind !== 'granted') throw new Error(b.kind);
        const t2 = await current('t1');
        const [second] = await store.finish([
          {
            ...proofOf(s, 'r1', { token: b.token, requestId: 'q-again' }),
            taskModRevision: t2.modRevision,
            next: attemptFailed(t2.record, b.token, error, 'failed', ENV),
          },
        ]);
        expect(second?.ok && second.value.kind).toBe('done');
        expect((await current('t1')).record).toMatchObject({
          state: 'failed',
          attempts: 2,
          lastError: { name: 'Boom' },
        });
      });

      it('ends a batch in one txn, and tells which failed when one cannot', async () => {
        const s = await open();
        const a = await granted(s, 'ta', 'ra');
        const b = await granted(s, 'tb', 'rb');
        const jobFor = async (taskId: string, resource: string, g: { token: bigint; requestId: string }) => {
          const t = await current(taskId);
          return {
            ...proofOf(s, resource, g),
            taskModRevision: t.modRevision,
            next: completed(t.record, g.token, `task:${taskId}`, ENV.nowMs),
          };
        };
        const ja = await jobFor('ta', 'ra', a);
        const jb = { ...(await jobFor('tb', 'rb', b)), token: b.token + 7n };
        const out = await store.finish([ja, jb]);
        expect(out.map((r) => (r.ok ? r.value.kind : 'error'))).toEqual(['done', 'notHolder']);
      });
    });

    describe('tasks', () => {
      it('submits idempotently by id: nothing is created when one id exists', async () => {
        await submit('t1', 'r1');
        const res = await store.submitTasks([newTaskOf('t1', 'r1'), newTaskOf('t2', 'r2')]);
        expect(res.kind).toBe('exists');
        if (res.kind !== 'exists') return;
        expect(res.existing[0]).toMatchObject({ record: { taskId: 't1' } });
        expect(res.existing[1]).toBeUndefined();
        expect(await store.task('t2')).toBeUndefined();
        expect((await store.taskDetail('t2'))?.payload).toBeUndefined();
      });

      it('keeps the payload under inputs/ (never in the record) and shows it with the history on demand', async () => {
        await submit('t1', 'r1', { big: 'y'.repeat(10_000) });
        const task = await current('t1');
        expect(task.value.length).toBeLessThan(1_000);
        expect(task.record).toMatchObject({ payloadBytes: 10_010 });
        expect((await store.taskDetail('t1'))?.payload).toEqual({ big: 'y'.repeat(10_000) });
        const page = await store.taskPage(undefined, 10);
        expect(page.tasks.map((t) => t.value.length).every((n) => n < 1_000)).toBe(true);
      });

      it('keeps the last MAX_TASK_HISTORY ended attempts as history keys, dropping older ones', async () => {
        const s = await open();
        await submit('h', 'rh');
        for (let n = 1; n <= MAX_TASK_HISTORY + 3; n += 1) {
          const t = await current('h');
          const g = await grantOne(job(s, t, `q${n}`));
          if (g.kind !== 'granted') throw new Error(g.kind);
          const held = await current('h');
          const [r] = await store.finish([
            {
              ...proofOf(s, 'rh', { token: g.token, requestId: `q${n}` }),
              taskModRevision: held.modRevision,
              next: released(held.record, g.token, ENV.nowMs),
            },
          ]);
          expect(r?.ok && r.value.kind).toBe('done');
        }
        const detail = await store.taskDetail('h');
        expect(detail?.history).toHaveLength(MAX_TASK_HISTORY);
        expect(detail?.history.map((h) => h.outcome)).toEqual(Array(MAX_TASK_HISTORY).fill('released'));
        expect(detail?.task.record.endedAttempts).toBe(MAX_TASK_HISTORY + 3);
        const tokens = detail?.history.map((h) => BigInt(h.token)) ?? [];
        expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens);
      });

      it('cancels a held task: the owner key goes with it; a stale read is raced', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const task = await store.task('t1');
        if (task === undefined) throw new Error('no task');
        const owner = { sessionId: s.sessionId, token: a.token, requestId: a.requestId };
        const next = cancelled(task.record, a.token, ENV.nowMs);
        const stale = await store.cancelTask({
          task: task.record,
          taskModRevision: task.modRevision - 1n,
          owner,
          next,
        });
        expect(stale).toEqual({ kind: 'raced' });
        const wrongOwner = await store.cancelTask({
          task: task.record,
          taskModRevision: task.modRevision,
          owner: { ...owner, token: a.token + 1n },
          next,
        });
        expect(wrongOwner).toEqual({ kind: 'raced' });
        const ok = await store.cancelTask({ task: task.record, taskModRevision: task.modRevision, owner, next });
        expect(ok.kind).toBe('cancelled');
        expect((await store.task('t1'))?.record.state).toBe('cancelled');
        expect(await store.owner('r1')).toBeUndefined();
        expect(await store.holding(s.sessionId, a.requestId)).toBeUndefined();
      });

      it('settles a lost attempt only when its owner key is gone and the task is as the grant wrote it', async () => {
        const s = await open();
        const a = await granted(s, 't1', 'r1');
        const task = await current('t1');
        const next = attemptFailed(
          task.record,
          a.token,
          { name: 'LeaseExpired', message: 'x', retryable: true },
          'expired',
          ENV,
        );
        const prev = task.record;
        // Still held (owner compare): raced.
        expect(await store.settleLostAttempt({ token: a.token, prev, next })).toEqual({ kind: 'raced' });
        await store.endSession({
          sessionId: s.sessionId,
          knownModRevision: s.modRevision,
          held: [{ resource: 'r1', token: a.token }],
        });
        // Another attempt's token (task compare): raced.
        expect(await store.settleLostAttempt({ token: a.token - 1n, prev, next })).toEqual({ kind: 'raced' });
        expect((await store.settleLostAttempt({ token: a.token, prev, next })).kind).toBe('rewritten');
        expect((await current('t1')).record).toMatchObject({ state: 'pending', lastEvent: 'expired', attempts: 1 });
        expect((await store.taskDetail('t1'))?.history).toMatchObject([
          { outcome: 'expired', token: a.token.toString() },
        ]);
        // Settled once: a second settlement of the same attempt is raced.
        expect(await store.settleLostAttempt({ token: a.token, prev, next })).toEqual({ kind: 'raced' });
      });

      it('retries a failed task only from the record read; purges only unchanged records', async () => {
        await submit('t1', 'r1');
        await submit('t2', 'r2');
        const t1 = await current('t1');
        const failed = { ...t1.record, state: 'failed' as const, endedAtMs: 5 };
        await store.kv.txn('test', { compare: [], success: [op.put(store.keys.task('t1'), JSON.stringify(failed))] });
        const read = await current('t1');
        expect(await store.retryTask({ modRevision: read.modRevision - 1n, next: retried(read.record, 9) })).toEqual({
          kind: 'raced',
        });
        expect((await store.retryTask({ modRevision: read.modRevision, next: retried(read.record, 9) })).kind).toBe(
          'rewritten',
        );
        expect((await current('t1')).record).toMatchObject({ state: 'pending', attempts: 0, lastEvent: 'retried' });
        const t2 = await current('t2');
        const now = await current('t1');
        expect(
          await store.purgeTasks([
            { taskId: 't1', modRevision: now.modRevision - 1n },
            { taskId: 't2', modRevision: t2.modRevision },
          ]),
        ).toEqual(['t2']);
        expect(await store.task('t1')).toBeDefined();
        expect(await store.task('t2')).toBeUndefined();
      });

      it('purges a task with its payload and its history, and no other task of a longer id', async () => {
        const s = await open();
        const a = await granted(s, 'p', 'rp');
        await submit('p/2', 'rp2');
        const held = await current('p');
        await store.finish([
          {
            ...proofOf(s, 'rp', a),
            taskModRevision: held.modRevision,
            next: completed(held.record, a.token, 'task:p', ENV.nowMs),
          },
        ]);
        const done = await current('p');
        expect(await store.purgeTasks([{ taskId: 'p', modRevision: done.modRevision }])).toEqual(['p']);
        const left = await store.kv.rangeAll(store.keys.prefix, { valueBytes: 1_000 });
        const keys = left.kvs.map((kv) => kv.key.slice(store.keys.prefix.length));
        expect(keys.filter((k) => k.includes('/p#') || k.endsWith('/p'))).toEqual([]);
        expect(keys).toEqual(expect.arrayContaining(['inputs/p/2', 'tasks/p/2']));
      });

      it('pages tasks in id order and snapshots tasks and owners at one revision', async () => {
        const s = await open();
        for (const id of ['a', 'b', 'c']) await submit(id, `r-${id}`);
        const page = await store.taskPage(undefined, 2);
        expect(page.tasks.map((t) => t.record.taskId)).toEqual(['a', 'b']);
        expect(page.more).toBe(true);
        expect((await store.taskPage('b', 10)).tasks.map((t) => t.record.taskId)).toEqual(['c']);
        const task = await store.task('b');
        if (task === undefined) throw new Error('no task');
        const g = await grantOne(job(s, task, 'q'));
        const seen: string[] = [];
        const snap = await store.snapshot((tasks) => seen.push(...tasks.map((t) => t.record.taskId)));
        expect(seen).toEqual(['a', 'b', 'c']);
        expect(snap.owners.map((o) => [o.resource, o.token])).toEqual([['r-b', g.kind === 'granted' ? g.token : 0n]]);
        expect(snap.revision).toBeGreaterThanOrEqual(g.kind === 'granted' ? g.token : 0n);
      });
    });

    describe('layout v1', () => {
      async function putLegacy(taskId: string, resource: string, over: Record<string, unknown> = {}) {
        await store.kv.txn('test', {
          compare: [],
          success: [op.put(store.keys.task(taskId), legacyRecord(taskId, resource, over))],
        });
        const t = await store.task(taskId);
        if (t?.legacy === undefined) throw new Error('not read as a v1 record');
        return t;
      }
      const HISTORY = [
        { attempt: 1, workerId: 'w0', token: '3', outcome: 'released', startedAtMs: 1, endedAtMs: 2 },
        { attempt: 1, workerId: 'w0', token: '4', outcome: 'expired', startedAtMs: 3, endedAtMs: 4 },
      ];

      it('reads a v1 record as its v2 shape, and migrateTasks moves payload and history out (once)', async () => {
        const old = await putLegacy('old', 'r-old', { history: HISTORY });
        expect(old.record).toMatchObject({ v: 2, endedAttempts: 2, last: { token: '4' } });
        const item = { modRevision: old.modRevision, record: old.record, legacy: old.legacy };
        if (item.legacy === undefined) throw new Error('legacy');
        expect(await store.migrateTasks([{ ...item, legacy: item.legacy }])).toBe(1);
        const now = await current('old');
        expect(now.legacy).toBeUndefined();
        expect(now.value).not.toContain('payload"');
        const detail = await store.taskDetail('old');
        expect(detail?.payload).toEqual({ legacy: 'old' });
        expect(detail?.history.map((h) => h.token)).toEqual(['3', '4']);
        // A second conversion from the same read is a failed compare: nothing changes.
        expect(await store.migrateTasks([{ ...item, legacy: item.legacy }])).toBe(0);
        expect((await current('old')).modRevision).toBe(now.modRevision);
      });

      it('a held v1 record is converted by the txn that ends its attempt', async () => {
        const s = await open();
        const old = await putLegacy('held', 'r-held', { history: HISTORY });
        const g = await grantOne(job(s, old, 'q'));
        if (g.kind !== 'granted') throw new Error(g.kind);
        // The grant of a v1 record wrote the v2 shape; make it a v1 open attempt again, as an old
        // coordinator's grant would have left it.
        await store.kv.txn('test', {
          compare: [],
          success: [
            op.put(
              store.keys.task('held'),
              legacyRecord('held', 'r-held', {
                history: HISTORY,
                attempts: 1,
                open: { attempt: 1, workerId: 'w1', sessionId: s.sessionId, startedAtMs: 5 },
              }),
            ),
          ],
        });
        const read = await current('held');
        if (read.legacy === undefined) throw new Error('legacy');
        const [r] = await store.finish([
          {
            ...proofOf(s, 'r-held', { token: g.token, requestId: 'q' }),
            taskModRevision: read.modRevision,
            next: completed(read.record, g.token, 'task:held', ENV.nowMs),
            legacy: read.legacy,
          },
        ]);
        expect(r?.ok && r.value.kind).toBe('done');
        const detail = await store.taskDetail('held');
        expect(detail?.task.legacy).toBeUndefined();
        expect(detail?.payload).toEqual({ legacy: 'held' });
        expect(detail?.history.map((h) => h.outcome)).toEqual(['released', 'expired', 'completed']);
      });
    });

    describe('locks', () => {
      it('one holder at a time; released by its lease, and gone by itself when the lease ends', async () => {
        const lock = await store.acquireLock('retention', 'c1', 2);
        expect(lock).toBeDefined();
        expect(await store.acquireLock('retention', 'c2', 2)).toBeUndefined();
        if (lock === undefined) return;
        await store.releaseLock('retention', lock);
        const again = await store.acquireLock('retention', 'c2', 1);
        expect(again).toBeDefined();
        let free: unknown;
        for (let i = 0; i < 100 && free === undefined; i += 1) {
          await target.pass(50);
          free = await store.acquireLock('retention', 'c3', 5);
        }
        expect(free).toBeDefined();
      });
    });

    describe('watch', () => {
      it('delivers parsed task, owner and session events grouped by revision, then progress', async () => {
        const start = await store.snapshot(() => undefined);
        const groups: { revision: bigint; events: readonly StoreEvent[] }[] = [];
        let progress = 0n;
        const handle = await store.watch(start.revision + 1n, {
          onRevision: (revision, events) => groups.push({ revision, events }),
          onProgress: (revision) => {
            progress = revision;
          },
          onError: () => undefined,
        });
        try {
          const s = await open();
          const { token } = await granted(s, 't1', 'r1');
          for (let i = 0; i < 50 && progress < token; i += 1) await target.pass(20);
          const grant = groups.find((g) => g.revision === token);
          expect(grant?.events.map((e) => e.kind).sort()).toEqual(['owner', 'task']);
          const owner = grant?.events.find((e) => e.kind === 'owner');
          expect(owner).toMatchObject({ resource: 'r1', owner: { token, record: { taskId: 't1' } } });
          expect(groups.some((g) => g.events.some((e) => e.kind === 'session' && e.sessionId === s.sessionId))).toBe(
            true,
          );
          await store.revokeLease(s.leaseId);
          const revoked = await store.snapshot(() => undefined);
          for (let i = 0; i < 50 && progress < revoked.revision; i += 1) await target.pass(20);
          const last = groups.at(-1);
          expect(last?.events).toEqual(
            expect.arrayContaining([
              { kind: 'owner', resource: 'r1', owner: undefined },
              { kind: 'session', sessionId: s.sessionId, session: undefined },
            ]),
          );
        } finally {
          await handle.cancel();
        }
      });
    });

    describe('web console', () => {
      it('revokeConsoleSession: recorded once (a second logout writes nothing), read back, watched', async () => {
        const before = await store.consoleRevocations();
        expect(before.revocations).toEqual([]);
        const seen: string[] = [];
        const handle = await store.watchConsoleRevocations(before.revision + 1n, {
          onRevoked: (revocations) => seen.push(...revocations.map((r) => r.loginId)),
          onError: () => undefined,
        });
        try {
          const revocation = { loginId: 'AAAAAAAAAAAAAAAA', expiresAtMs: 2_000_000_000_000 };
          const first = await store.revokeConsoleSession(revocation, 60);
          expect(first.kind).toBe('revoked');
          // The key is absent-compared: a second logout of the same login changes nothing.
          expect(await store.revokeConsoleSession(revocation, 60)).toEqual({ kind: 'already' });
          expect((await store.consoleRevocations()).revocations).toEqual([revocation]);
          for (let i = 0; i < 50 && seen.length === 0; i += 1) await target.pass(20);
          expect(seen).toEqual([revocation.loginId]);
          // Not in the index's watch range: the task feed never sees the console's keys.
          expect(store.keys.parse(store.keys.consoleRevocation(revocation.loginId))).toBeUndefined();
        } finally {
          await handle.cancel();
        }
      });

      it("revokeConsoleSession: the key lives on a lease of the cookie's remaining life", async () => {
        const revocation = { loginId: 'BBBBBBBBBBBBBBBB', expiresAtMs: 2_000_000_000_000 };
        await store.revokeConsoleSession(revocation, 1);
        expect((await store.consoleRevocations()).revocations).toEqual([revocation]);
        for (let i = 0; i < 200 && (await store.consoleRevocations()).revocations.length > 0; i += 1) {
          await target.pass(50);
        }
        expect((await store.consoleRevocations()).revocations).toEqual([]);
      });
    });
  });
}
