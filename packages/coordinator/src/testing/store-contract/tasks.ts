/** The LeaseStore contract: tasks (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import { recordKvCalls } from '../kv-calls.js';
import { MAX_TASK_HISTORY } from '@leasehold/protocol';
import { attemptFailed, cancelled, completed, released, retried } from '../../core/lifecycle.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { ENV, newTaskOf, type Tools } from './fixtures.js';

export function describeTasks(t: Tools): void {
  const { submit, open, job, current, grantOne, granted, proofOf } = t;
  describe('tasks', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
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

    it('ends a session and settles its lost attempts in one txn; a settled task changed since fails the whole end', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const b = await granted(s, 't2', 'r2');
      const lost = (token: bigint, record: Awaited<ReturnType<typeof current>>['record']) => ({
        token,
        prev: record,
        next: attemptFailed(record, token, { name: 'LeaseExpired', message: 'x', retryable: true }, 'expired', ENV),
      });
      const t1 = (await current('t1')).record;
      const t2 = (await current('t2')).record;
      const held = [
        { resource: 'r1', token: a.token },
        { resource: 'r2', token: b.token },
      ];
      const end = { sessionId: s.sessionId, knownModRevision: s.modRevision, held };
      // Only the attempt of a held owner key, at its token, may be settled with the end.
      await expect(store.endSession({ ...end, settle: [lost(b.token, t1)] })).rejects.toThrow(RangeError);
      // t2's record changed since its grant (the compare of its settlement fails): nothing happens.
      const stale = lost(b.token, t2);
      await store.kv.txn('test', {
        compare: [],
        success: [op.put(store.keys.task('t2'), JSON.stringify({ ...t2, priority: 1 }))],
      });
      expect(await store.endSession({ ...end, settle: [lost(a.token, t1), stale] })).toEqual({
        kind: 'changed',
      });
      expect(await store.owner('r1')).toMatchObject({ token: a.token });
      expect((await current('t1')).record).toMatchObject({ lastEvent: 'granted' });
      // Without t2's: both owner keys gone and t1's attempt recorded, at one revision.
      const ended = await store.endSession({ ...end, settle: [lost(a.token, t1)] });
      if (ended.kind !== 'ended') throw new Error(`expected ended, got ${ended.kind}`);
      expect(await store.owner('r1')).toBeUndefined();
      expect(await store.owner('r2')).toBeUndefined();
      expect(await current('t1')).toMatchObject({
        modRevision: ended.revision,
        record: { state: 'pending', lastEvent: 'expired', attempts: 1 },
      });
      expect((await store.taskDetail('t1'))?.history).toMatchObject([
        { outcome: 'expired', token: a.token.toString() },
      ]);
      // Settled once: the ordinary settlement of the same attempt is raced.
      expect(await store.settleLostAttempt(lost(a.token, t1))).toEqual({ kind: 'raced' });
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
      const names = recordKvCalls(store.kv).txns;
      expect(
        await store.purgeTasks([
          { taskId: 't1', modRevision: now.modRevision - 1n },
          { taskId: 't2', modRevision: t2.modRevision },
        ]),
      ).toEqual(['t2']);
      // One txn: the changed task is left alone, and fails no other.
      expect(names).toEqual(['purgeTasks']);
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
}
