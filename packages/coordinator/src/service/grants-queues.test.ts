/**
 * GrantService per queue (issue 25), over the in-memory etcd and a manual clock: a session is
 * granted only tasks of its queues (a hello naming none serves `default`), an acquire may narrow to
 * some of them but never name another, the queues take turns, and a long poll wakes only for a
 * change in one of its queues.
 */
import { describe, expect, it } from 'vitest';
import { eachServiceCluster, type ServiceCluster, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;

eachServiceCluster((c, first) => {
  cluster = c;
  c1 = first;
});

const to = (queue: string) => ({ queue });

describe('grants per queue', () => {
  it("grants a session only its queues' tasks; a hello with no queues serves default (old submits included)", async () => {
    await cluster.submit(c1, 'ta', 'ra', {}, to('alpha'));
    await cluster.submit(c1, 'td', 'rd'); // no queue: default
    const plain = await cluster.worker(c1, 'w-plain');
    const alpha = await cluster.worker(c1, 'w-alpha', 'inc-1', 100, ['alpha']);
    expect(await cluster.acquire(plain)).toMatchObject({ type: 'lease.granted', taskId: 'td' });
    expect((await cluster.acquire(plain)).type).toBe('lease.none');
    expect(await cluster.acquire(alpha)).toMatchObject({ type: 'lease.granted', taskId: 'ta' });
  });

  it('never grants a task of another queue by id', async () => {
    await cluster.submit(c1, 'tb', 'rb', {}, to('beta'));
    const alpha = await cluster.worker(c1, 'w-alpha', 'inc-1', 100, ['alpha']);
    expect((await cluster.acquire(alpha, { taskId: 'tb' })).type).toBe('lease.none');
    expect(cluster.owners().size).toBe(0);
  });

  it('an acquire may narrow to some of its queues; naming another is INVALID_MESSAGE and changes nothing', async () => {
    await cluster.submit(c1, 'ta', 'ra', {}, to('alpha'));
    await cluster.submit(c1, 'tb', 'rb', {}, to('beta'));
    const w = await cluster.worker(c1, 'w', 'inc-1', 100, ['alpha', 'beta']);
    expect(await cluster.acquire(w, { queues: ['gamma'] })).toMatchObject({
      type: 'error',
      code: 'INVALID_MESSAGE',
      retryable: false,
    });
    expect(cluster.owners().size).toBe(0);
    expect(await cluster.acquire(w, { queues: ['beta'] })).toMatchObject({ type: 'lease.granted', taskId: 'tb' });
  });

  it('lets the queues of a session take turns (one queue never starves the other)', async () => {
    for (let i = 0; i < 3; i += 1) {
      await cluster.submit(c1, `a${i}`, `ra${i}`, {}, to('alpha'));
      await cluster.submit(c1, `b${i}`, `rb${i}`, {}, to('beta'));
    }
    const w = await cluster.worker(c1, 'w', 'inc-1', 100, ['alpha', 'beta']);
    const queues: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const reply = await cluster.acquire(w);
      if (reply.type !== 'lease.granted') throw new Error(reply.type);
      queues.push(reply.taskId.charAt(0));
    }
    expect(queues).toEqual(['a', 'b', 'a', 'b']);
  });

  it('a task id submitted again to another queue is a CONFLICT (the queue is part of the definition)', async () => {
    await cluster.submit(c1, 't', 'r', {}, to('alpha'));
    const again = await c1.services.tasks.submit({ taskId: 't', resource: 'r', payload: {}, queue: 'beta' });
    expect(again).toMatchObject({ ok: false, code: 'CONFLICT' });
    const same = await c1.services.tasks.submit({ taskId: 't', resource: 'r', payload: {}, queue: 'alpha' });
    expect(same).toMatchObject({ ok: true, created: false, task: { queue: 'alpha' } });
    const batch = await c1.services.tasks.submitMany([
      { taskId: 'u', resource: 'r2', payload: {} },
      { taskId: 'u', resource: 'r2', payload: {}, queue: 'beta' },
    ]);
    expect(batch.map((o) => (o.ok ? 'ok' : o.code))).toEqual(['ok', 'CONFLICT']);
  });

  it('wakes a long poll for a task of its queue, not for one of another queue', async () => {
    const alpha = await cluster.worker(c1, 'w-alpha', 'inc-1', 100, ['alpha']);
    let selects = 0;
    const index = c1.services.index;
    const select = index.select.bind(index);
    index.select = (options) => {
      selects += 1;
      return select(options);
    };
    let answered = false;
    const waiting = cluster.acquire(alpha, { waitMs: 5_000 }).then((r) => {
      answered = true;
      return r;
    });
    await cluster.settle();
    const before = selects;
    await cluster.submit(c1, 'tb', 'rb', {}, to('beta'));
    await cluster.settle();
    // Not woken: no select ran for it, still waiting.
    expect(selects).toBe(before);
    expect(answered).toBe(false);
    await cluster.submit(c1, 'ta', 'ra', {}, to('alpha'));
    expect(await waiting).toMatchObject({ type: 'lease.granted', taskId: 'ta' });
  });
});
