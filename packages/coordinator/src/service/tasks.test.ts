/**
 * Submits on the real services (in-memory etcd): the payload limit (MAX_TASK_PAYLOAD_BYTES) and the
 * record's bound refuse with PAYLOAD_TOO_LARGE and change nothing — a batch with one such task is
 * refused whole; a payload lives under `inputs/`, never in the record; views carry it only on GET.
 * Purges: the index forgets what a purge deleted at once, so purgeAll's next page does not plan the
 * same tasks again before the watch reports their deletes (`forgetPurged`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;

afterEach(async () => {
  await cluster.close();
});

async function setup(env: Record<string, string> = { MAX_TASK_PAYLOAD_BYTES: '1000' }): Promise<void> {
  cluster = new ServiceCluster(env);
  c1 = await cluster.coordinator('c1');
}

const keys = () => cluster.etcd.keys(cluster.keys.prefix).map((kv) => kv.key.slice(cluster.keys.prefix.length));

describe('submit limits', () => {
  it('refuses a payload over MAX_TASK_PAYLOAD_BYTES with PAYLOAD_TOO_LARGE and stores nothing', async () => {
    await setup();
    const before = cluster.etcd.revision;
    const big = { pad: 'x'.repeat(1_000) };
    const out = await c1.services.tasks.submit({ taskId: 'big', resource: 'r', payload: big });
    expect(out).toMatchObject({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
    expect(cluster.etcd.revision).toBe(before);
    // At the limit exactly: accepted (the bytes of the payload's JSON, UTF-8).
    const exact = { p: 'é'.repeat(494) }; // {"p":"…"} = 8 + 494 × 2 bytes
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(996);
    expect(await c1.services.tasks.submit({ taskId: 'fits', resource: 'r', payload: exact })).toMatchObject({
      ok: true,
      task: { payloadBytes: 996 },
    });
  });

  it('refuses a batch with one payload over the limit whole: none of it is stored', async () => {
    await setup();
    const before = cluster.etcd.revision;
    const out = await c1.services.tasks.submitMany([
      { taskId: 'a', resource: 'r1', payload: { n: 1 } },
      { taskId: 'b', resource: 'r2', payload: { pad: 'x'.repeat(2_000) } },
      { taskId: 'c', resource: 'r3', payload: { n: 3 } },
    ]);
    expect(out.map((o) => (o.ok ? 'ok' : o.code))).toEqual([
      'PAYLOAD_TOO_LARGE',
      'PAYLOAD_TOO_LARGE',
      'PAYLOAD_TOO_LARGE',
    ]);
    expect(cluster.etcd.revision).toBe(before);
    expect(keys()).toEqual([]);
  });

  it('refuses a retry policy that would make the record exceed its bound (MAX_TASK_RECORD_BYTES)', async () => {
    await setup();
    const names = Array.from({ length: 32 }, (_, i) => `${'\u0001'.repeat(190)}${i}`);
    const out = await c1.services.tasks.submit({
      taskId: 'wide',
      resource: 'r',
      payload: 1,
      retry: { nonRetryable: names },
    });
    expect(out).toMatchObject({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
    expect(keys()).toEqual([]);
  });

  it('keeps the payload under inputs/; lists and submit replies leave it out, the task view reads it', async () => {
    await setup({});
    const payload = { doc: 'x'.repeat(5_000) };
    const created = await c1.services.tasks.submit({ taskId: 't1', resource: 'r', payload });
    expect(created.ok && created.task).toMatchObject({ payloadBytes: 5_010 });
    expect(created.ok && created.task).not.toHaveProperty('payload');
    expect(keys().sort()).toEqual(['inputs/t1', 'tasks/t1']);
    const record = cluster.etcd.get(cluster.keys.task('t1'));
    expect(record?.value.length).toBeLessThan(1_000);
    const page = await c1.services.tasks.list({ limit: 10 });
    expect(page.tasks[0]).not.toHaveProperty('payload');
    expect(page.tasks[0]).not.toHaveProperty('history');
    expect(await c1.services.tasks.get('t1')).toMatchObject({ payload, history: [] });
    // A repeat is judged by the stored digest: same payload 200, another 409.
    expect(await c1.services.tasks.submit({ taskId: 't1', resource: 'r', payload })).toMatchObject({
      ok: true,
      created: false,
    });
    expect(await c1.services.tasks.submit({ taskId: 't1', resource: 'r', payload: { doc: 'y' } })).toMatchObject({
      ok: false,
      code: 'CONFLICT',
    });
  });
});

describe('purge', () => {
  it('a second purge right after a first does not plan the same tasks again, even before the watch reports the deletes', async () => {
    await setup({});
    for (let i = 0; i < 5; i++) {
      await cluster.submit(c1, `p${i}`, `r${i}`, {}, { delayMs: 600_000 });
      expect(await c1.services.tasks.cancel(`p${i}`)).toMatchObject({ ok: true });
    }
    await cluster.settle();
    // The index hears of nothing from the watch from here on: the purges' own replies must do.
    c1.backend.pauseWatch();
    const request = { state: 'cancelled', olderThanMs: 0, limit: 2 } as const;
    expect(await c1.services.tasks.purge(request)).toEqual({ purged: 2, more: true });
    expect(await c1.services.tasks.purge(request)).toEqual({ purged: 2, more: true });
    expect(await c1.services.tasks.purge(request)).toEqual({ purged: 1, more: false });
    expect(await c1.services.tasks.purge(request)).toEqual({ purged: 0, more: false });
    c1.backend.resumeWatch();
    await cluster.settle();
    expect(keys().filter((k) => /p\d/.test(k))).toEqual([]);
    expect(await c1.services.tasks.purge(request)).toEqual({ purged: 0, more: false });
  });

  it('the index forgets only the tasks whose delete landed: one retried since the plan stays known', async () => {
    await setup({});
    const w = await cluster.worker(c1, 'w1');
    for (const id of ['f0', 'f1']) {
      await cluster.submit(c1, id, `r-${id}`);
      const g = await cluster.acquire(w, { taskId: id });
      await cluster.fail(w, id, `r-${id}`, tokenOf(g), { name: 'Fatal', message: 'x', retryable: false });
    }
    await cluster.settle();
    c1.backend.pauseWatch();
    // f1 retried behind the index's back: its delete compares the revision the index saw and fails.
    expect(await c1.services.tasks.retry('f1')).toMatchObject({ ok: true });
    expect(await c1.services.tasks.purge({ state: 'failed', olderThanMs: 0 })).toEqual({ purged: 1, more: false });
    expect(c1.services.index.endedTask('f0')).toBeUndefined();
    expect(c1.services.index.endedTask('f1')).toBeDefined(); // until the watch tells of the retry
    c1.backend.resumeWatch();
    await cluster.settle();
    expect(c1.services.index.pendingTask('f1')).toBeDefined();
  });
});
