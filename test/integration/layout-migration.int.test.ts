/**
 * Upgrade from key layout v1 (coordinators before 0.3: the payload and the history inside
 * `tasks/<id>`) on a real etcd: a prefix written by an old coordinator — 2,000 pending tasks of
 * 8 KiB, five of 1 MiB (the old HTTP body limit), ended tasks with histories, and an attempt whose
 * lease was lost (open, its owner key gone) — then THREE coordinators of layout v2 start on it at
 * once. Each converts what it sees; the mod_revision compare makes a second conversion a no-op.
 *
 * After: no record under `tasks/` carries a payload or a history (every one is small), each task's
 * payload is under `inputs/` and its history under `history/`, every pending task is granted with
 * its own payload, the lost attempt was settled (and its record converted by that txn), and the
 * 1 MiB records did not stop a start (pages halve on an oversized reply). Mechanisms:
 * LayoutMigration (service/migration.ts), `migrateTasks`, `recordWriteOps`, `Kv.rangePages`.
 */
import { DEFAULT_RETRY_POLICY, type Grant, type TaskView } from '@leasehold/protocol';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/layout-migration/';
const SMALL = 2_000;
const LARGE = 5;

const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let raw: Etcd3;

/** A task record exactly as a coordinator of layout v1 wrote it. */
function v1(taskId: string, resource: string, payload: unknown, over: Record<string, unknown> = {}): string {
  return JSON.stringify({
    v: 1,
    taskId,
    resource,
    payload,
    state: 'pending',
    attempts: 0,
    priority: 0,
    retry: DEFAULT_RETRY_POLICY,
    lastEvent: 'submitted',
    atMs: 1_700_000_000_000,
    createdAtMs: 1_700_000_000_000,
    ...over,
  });
}

const HISTORY = [
  {
    attempt: 1,
    workerId: 'old-w',
    sessionId: 'aa',
    token: '7',
    outcome: 'failed',
    error: { name: 'E', message: 'm' },
    startedAtMs: 1,
    endedAtMs: 2,
  },
  { attempt: 2, workerId: 'old-w', sessionId: 'aa', token: '9', outcome: 'completed', startedAtMs: 3, endedAtMs: 4 },
];

beforeAll(async () => {
  // The test's own client reads 1 MiB values: a receive limit to match, and no breaker on refusals.
  raw = new Etcd3({
    hosts: stack.etcd.endpoints,
    grpcOptions: { 'grpc.max_receive_message_length': 64 * 1024 * 1024 },
  });
  const put = (ops: [string, string][]) =>
    raw.kv.txn({
      compare: [],
      success: ops.map(([k, v]) => ({ request_put: { key: Buffer.from(PREFIX + k), value: Buffer.from(v) } })),
      failure: [],
    });
  for (let start = 0; start < SMALL; start += 100) {
    const ops: [string, string][] = [];
    for (let i = start; i < start + 100; i += 1) {
      const id = `small/${String(i).padStart(5, '0')}`;
      ops.push([`tasks/${id}`, v1(id, `r/${i}`, { i, pad: 'x'.repeat(8_000) })]);
    }
    await put(ops);
  }
  for (let i = 0; i < LARGE; i += 1) {
    await put([[`tasks/large/${i}`, v1(`large/${i}`, `r/large-${i}`, { i, pad: 'y'.repeat(1024 * 1024 - 100) })]]);
  }
  await put([
    [
      'tasks/ended/done',
      v1(
        'ended/done',
        'r/done',
        { d: 1 },
        {
          state: 'completed',
          attempts: 2,
          history: HISTORY,
          result: { resultId: 'task:ended/done', token: '9' },
          endedAtMs: 5,
        },
      ),
    ],
    // An attempt whose lease was lost: open, and no owner key with its token.
    [
      'tasks/lost/1',
      v1(
        'lost/1',
        'r/lost',
        { lost: true },
        {
          attempts: 1,
          history: HISTORY.slice(0, 1),
          open: { attempt: 1, workerId: 'old-w', sessionId: 'bb', startedAtMs: 6 },
        },
      ),
    ],
  ]);
}, 120_000);

afterAll(async () => {
  raw.close();
});

/** Every key under the prefix with its value length (never the values: some are 1 MiB). */
async function layout(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let from = Buffer.from(PREFIX);
  for (;;) {
    const page = await raw.kv.range({ key: from, range_end: Buffer.from(`${PREFIX.slice(0, -1)}0`), limit: 40 });
    for (const kv of page.kvs) out.set(kv.key.toString().slice(PREFIX.length), kv.value.toString());
    if (!page.more || page.kvs.length === 0) return out;
    from = Buffer.concat([page.kvs[page.kvs.length - 1]?.key ?? Buffer.alloc(0), Buffer.from([0])]);
  }
}

describe('a prefix of layout v1', () => {
  it('three coordinators start on it at once and convert every record exactly once', async () => {
    // gRPC's default receive limit and 1 MiB pages: pages of old records halve until they fit, and
    // so do the converters' reads (five records of 1 MiB are more than one reply may carry).
    const small = {
      LEASEHOLD_COORDINATOR_ETCD_MAX_RESPONSE_BYTES: String(4 * 1024 * 1024),
      LEASEHOLD_COORDINATOR_ETCD_PAGE_BYTES: String(1024 * 1024),
    };
    const coordinators = await Promise.all([
      stack.coordinator(small),
      stack.coordinator(small),
      stack.coordinator(small),
    ]);
    const total = SMALL + LARGE + 2;
    const conversionsOf = () =>
      Promise.all(
        coordinators.map(async (c) => {
          const text = await c.metrics.registry.getSingleMetricAsString(
            'leasehold_coordinator_layout_conversions_total',
          );
          return Number(/ (\d+)$/m.exec(text)?.[1] ?? '0');
        }),
      );
    // The lost attempt is converted by its settlement, the others by the migration.
    await waitFor(
      'every record converted',
      async () => ((await conversionsOf()).reduce((a, b) => a + b, 0) >= total - 1 ? true : undefined),
      60_000,
      200,
    );
    const keys = await layout();
    const records = [...keys].filter(([k]) => k.startsWith('tasks/'));
    expect(records).toHaveLength(total);
    for (const [key, value] of records) expect(value.startsWith('{"v":2'), key).toBe(true);
    for (const [key, value] of keys) if (key.startsWith('tasks/')) expect(value.length, key).toBeLessThan(2_000);
    expect([...keys.keys()].filter((k) => k.startsWith('inputs/'))).toHaveLength(total);
    expect(JSON.parse(keys.get('inputs/large/3') ?? 'null')).toEqual({ i: 3, pad: 'y'.repeat(1024 * 1024 - 100) });
    expect([...keys.keys()].filter((k) => k.startsWith('history/ended/done#'))).toHaveLength(2);
    // Once each: a second conversion of a record is a failed compare, never counted.
    expect((await conversionsOf()).reduce((a, b) => a + b, 0)).toBe(total - 1);
    const admin = stack.admin(coordinators[0].url);
    const done = await admin.task('ended/done');
    expect(done.body).toMatchObject({
      state: 'completed',
      payload: { d: 1 },
      history: [
        { token: '7', outcome: 'failed' },
        { token: '9', outcome: 'completed' },
      ],
    });
  }, 120_000);

  it('settles the lost v1 attempt, and grants converted tasks with their own payloads', async () => {
    const c = await stack.coordinator();
    const admin = stack.admin(c.url);
    const lost = await waitFor('the lost attempt settled', async () => {
      const view = (await admin.task('lost/1')).body as TaskView | undefined;
      return view?.lastEvent === 'expired' ? view : undefined;
    });
    expect(lost).toMatchObject({ state: 'pending', attempts: 1, payload: { lost: true } });
    expect(lost.history?.map((h) => h.outcome)).toEqual(['failed', 'expired']);
    const w = await stack.worker(c.url, 'new-w');
    for (const id of ['large/2', 'small/01234', 'lost/1']) {
      const g = (await w.acquire(`q-${id}`, id)) as Grant;
      expect(g.type, id).toBe('lease.granted');
      const view = (await admin.task(id)).body as TaskView;
      expect(g.payload, id).toEqual(view.payload);
    }
    w.close();
  }, 60_000);
});
