/**
 * The task API: submit (idempotent by id), read, list (state filter, paging), cancel (owner removed,
 * holder pushed lease.revoked — also when another coordinator serves the holder), release (back to
 * pending), and the resource view.
 */
import type { Grant } from '@leasehold/protocol';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AdminClient } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';

const PREFIX = 'test/coordinator-tasks/';
interface BatchReply {
  readonly results: unknown[];
}
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let url1: string;
let url2: string;
let admin: AdminClient;

beforeAll(async () => {
  url1 = (await stack.coordinator()).url;
  url2 = (await stack.coordinator()).url;
  admin = stack.admin(url1);
});

describe('task API', () => {
  it('submits idempotently, reads and lists with state filters and paging', async () => {
    expect(await admin.submit('list/a', 'tasks/ra', { x: 1 })).toMatchObject({
      status: 201,
      // Submit replies carry the payload's size, not the payload (read on demand: GET /v1/tasks/:id).
      body: { taskId: 'list/a', state: 'pending', attempts: 0, payloadBytes: 7 },
    });
    expect(await admin.submit('list/a', 'tasks/ra', { x: 1 })).toMatchObject({
      status: 200,
      body: { state: 'pending' },
    });
    for (const id of ['list/b', 'list/c', 'list/d']) await admin.submit(id, `tasks/r-${id}`);
    expect(await admin.task('list/a')).toMatchObject({ status: 200, body: { taskId: 'list/a', resource: 'tasks/ra' } });

    const w = await stack.worker(url1, 'lister');
    const g = (await w.acquire('q1', 'list/b')) as Grant;
    expect(g).toMatchObject({ type: 'lease.granted', taskId: 'list/b' });
    expect((await admin.task('list/b')).body).toMatchObject({
      state: 'leased',
      attempts: 1,
      owner: { workerId: 'lister', token: g.token, sessionId: w.sessionId },
    });

    const ids = (page: { body: { tasks: { taskId: string }[] } }) => page.body.tasks.map((t) => t.taskId);
    const page1 = await admin.list('?limit=2');
    expect(ids(page1)).toEqual(['list/a', 'list/b']);
    expect(page1.body.next).toBe('list/b');
    const page2 = await admin.list(`?limit=2&after=${encodeURIComponent(page1.body.next ?? '')}`);
    expect(ids(page2)).toEqual(['list/c', 'list/d']);
    expect(ids(await admin.list('?state=leased'))).toEqual(['list/b']);
    expect(ids(await admin.list('?state=pending'))).toEqual(['list/a', 'list/c', 'list/d']);
    w.close();
  });

  it('cancels a leased task: owner removed, holder pushed lease.revoked even via another coordinator', async () => {
    await admin.submit('cancel/t', 'tasks/cancel-r');
    const w = await stack.worker(url1, 'holder');
    const g = (await w.acquire('q1', 'cancel/t')) as Grant;
    expect(g.type).toBe('lease.granted');
    // Cancel through coordinator 2; coordinator 1 serves the holder and sees it in its watch.
    const res = await stack.admin(url2).cancel('cancel/t');
    expect(res).toMatchObject({ status: 200, body: { state: 'cancelled' } });
    expect(await w.push('lease.revoked')).toMatchObject({
      resource: 'tasks/cancel-r',
      token: g.token,
      reason: 'cancelled',
    });
    expect(await w.renew(g.resource, g.token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect((await admin.resource('tasks/cancel-r')).body).toMatchObject({ owner: null });
    expect(await admin.cancel('cancel/t')).toMatchObject({ status: 200, body: { state: 'cancelled' } });
    // A cancelled task is never granted again.
    expect(await w.acquire('q2', 'cancel/t')).toMatchObject({ type: 'lease.none' });
    w.close();
  });

  it('refuses to cancel a completed task', async () => {
    await admin.submit('done/t', 'tasks/done-r');
    const w = await stack.worker(url1, 'finisher');
    const g = (await w.acquire('q1', 'done/t')) as Grant;
    expect(await w.complete(g, 'task:done/t')).toMatchObject({ type: 'task.completed' });
    expect(await admin.cancel('done/t')).toMatchObject({ status: 409, body: { code: 'CONFLICT' } });
    w.close();
  });

  it('release puts the task back to pending, giving its attempt back; the next grant has a larger token', async () => {
    await admin.submit('rel/t', 'tasks/rel-r', { keep: true });
    const a = await stack.worker(url1, 'releaser');
    const first = (await a.acquire('q1', 'rel/t')) as Grant;
    expect(await a.release(first.resource, first.token)).toMatchObject({ type: 'lease.released', token: first.token });
    expect((await admin.task('rel/t')).body).toMatchObject({
      state: 'pending',
      attempts: 0,
      history: [{ outcome: 'released', token: first.token }],
    });
    const b = await stack.worker(url2, 'taker');
    const second = (await b.acquire('q1', 'rel/t')) as Grant;
    expect(second).toMatchObject({ type: 'lease.granted', attempt: 1, payload: { keep: true } });
    expect(BigInt(second.token)).toBeGreaterThan(BigInt(first.token));
    expect((await stack.admin(url2).resource('tasks/rel-r')).body).toMatchObject({
      resource: 'tasks/rel-r',
      token: second.token,
      owner: { workerId: 'taker', taskId: 'rel/t' },
    });
    expect((await stack.admin(url2).resourceView('tasks/rel-r')).remainingMs).toBeGreaterThan(0);
    a.close();
    b.close();
  });

  it('batch submit: one result per task, idempotent per task id, conflicts per task, over 128 tasks', async () => {
    expect(await admin.submit('batch/old', 'tasks/batch-old', { x: 1 })).toMatchObject({ status: 201 });
    const many = Array.from({ length: 300 }, (_, i) => ({
      taskId: `batch/n${i}`,
      resource: `tasks/bn${i}`,
      payload: { i },
    }));
    const tasks = [
      { taskId: 'batch/old', resource: 'tasks/batch-old', payload: { x: 1 } }, // same definition: 200
      { taskId: 'batch/new', resource: 'tasks/batch-new', payload: { y: 2 } }, // created: 201
      { taskId: 'batch/new', resource: 'tasks/batch-new', payload: { y: 2 } }, // repeat, same: 200
      { taskId: 'batch/new', resource: 'tasks/batch-new', payload: { y: 3 } }, // repeat, other: 409
      ...many,
    ];
    const first = await admin.call('POST', '/v1/tasks/batch', { tasks });
    expect(first.status).toBe(200);
    const results = (first.body as BatchReply).results as {
      taskId: string;
      status: number;
      error?: { code: string };
    }[];
    expect(results.map((r) => r.status)).toEqual([200, 201, 200, 409, ...many.map(() => 201)]);
    expect(results[3]).toMatchObject({ taskId: 'batch/new', error: { code: 'CONFLICT' } });
    expect(results[1]).toMatchObject({ task: { taskId: 'batch/new', state: 'pending', payloadBytes: 7 } });
    expect(results[1]).not.toHaveProperty('task.payload');
    expect((await admin.task('batch/n299')).body).toMatchObject({ resource: 'tasks/bn299', payload: { i: 299 } });

    // The same batch again (a retry after a lost reply): nothing created, nothing changed.
    const again = await admin.call('POST', '/v1/tasks/batch', { tasks });
    const statuses = ((again.body as BatchReply).results as { status: number }[]).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200, 409, ...many.map(() => 200)]);
    // A different definition under an existing id: 409 for that task only.
    const mixed = await admin.call('POST', '/v1/tasks/batch', {
      tasks: [
        { taskId: 'batch/n0', resource: 'tasks/elsewhere', payload: { i: 0 } },
        { taskId: 'batch/fresh', resource: 'tasks/batch-fresh', payload: null },
      ],
    });
    expect(((mixed.body as BatchReply).results as { status: number }[]).map((r) => r.status)).toEqual([409, 201]);
    expect((await admin.task('batch/n0')).body).toMatchObject({ resource: 'tasks/bn0' });

    // One invalid item refuses the whole request.
    const bad = await admin.call('POST', '/v1/tasks/batch', {
      tasks: [
        { taskId: 'batch/ok', resource: 'tasks/ok', payload: 1 },
        { taskId: '/bad', resource: 'r', payload: 1 },
      ],
    });
    expect(bad.status).toBe(400);
    expect((await admin.task('batch/ok')).status).toBe(404);
    expect((await admin.call('POST', '/v1/tasks/batch', { tasks: [] })).status).toBe(400);
  });
});
