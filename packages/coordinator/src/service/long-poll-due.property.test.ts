/**
 * A waiting long poll and delayed tasks (G36), over random programs on the real services, the
 * in-memory etcd and a manual clock: tasks submitted before or during the poll with random delays
 * (many of them a few ms), and the clock jumping forward inside random selects of the poll — time
 * that passes while a poll decides, unseen by its timers (a busy event loop, a timer firing a
 * millisecond before the wall clock's due time). Whatever the order, the poll is answered with a
 * task no earlier than that task's due time, and no later than 2 ms (plus the time the clock
 * jumped) after the earliest due time among the tasks submitted: never by its `waitMs` or the
 * session's deadline.
 *
 * Each way a poll could sleep past a backoff makes this fail: the grant service's due timer not set
 * earlier for a delayed task submitted while the poll waits (grants.ts `#armDue` in `wake`), or
 * not set again after it fired (`#dueAtMs` kept), and — before the due timer — `nextDueMs`
 * promoting a task that came due after the poll's select.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { EPOCH_MS, ServiceCluster } from '../testing/service-harness.js';

const POLICY = { SESSION_TTL_MS: '20000' };
/** The poll's waitMs: far beyond every due time below, so only a missed wake-up reaches it. */
const WAIT_MS = 10_000;

interface Program {
  readonly submits: readonly { readonly atMs: number; readonly delayMs: number }[];
  /** Select number (0-based, of the poll) -> how far the clock jumps right after it. */
  readonly jumps: readonly { readonly select: number; readonly ms: number }[];
}

const program: fc.Arbitrary<Program> = fc.record({
  submits: fc.array(
    fc.record({
      atMs: fc.integer({ min: 0, max: 1_500 }),
      delayMs: fc.oneof(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 1_500 })),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  jumps: fc.array(fc.record({ select: fc.nat(8), ms: fc.integer({ min: 1, max: 40 }) }), { maxLength: 4 }),
});

let cluster: ServiceCluster | undefined;

afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

async function run(p: Program): Promise<void> {
  const c = (cluster = new ServiceCluster(POLICY));
  const c1 = await c.coordinator('c1');
  const w = await c.worker(c1, 'w1');
  const nowEpoch = (): number => EPOCH_MS + c.clock.nowMs();
  let jumped = 0;
  c.jumpAfterSelects(c1, (n) => {
    const ms = p.jumps.filter((j) => j.select === n).reduce((sum, j) => sum + j.ms, 0);
    jumped += ms;
    return ms;
  });

  const start = c.clock.nowMs();
  let answeredAt: number | undefined;
  const poll = c.acquire(w, { waitMs: WAIT_MS }).then((reply) => {
    answeredAt = nowEpoch();
    return reply;
  });
  await c.settle();
  const due = new Map<string, number>();
  const order = [...p.submits].sort((a, b) => a.atMs - b.atMs);
  for (const [i, s] of order.entries()) {
    const wait = start + s.atMs - c.clock.nowMs();
    if (wait > 0) await c.advance(wait);
    if (answeredAt !== undefined) break;
    const view = await c.submit(c1, `t${i}`, `r${i}`, { i }, { delayMs: s.delayMs });
    due.set(`t${i}`, view.notBeforeMs ?? nowEpoch());
  }
  const earliest = Math.min(...due.values());
  // A jump delays what follows it by its own length at most: the poll may answer that much later.
  const bound = (): number => earliest + 2 + jumped;
  while (answeredAt === undefined && nowEpoch() < bound()) await c.advance(bound() - nowEpoch());

  const reply = await Promise.race([poll, Promise.resolve(undefined)]);
  expect(reply, `not answered by ${bound() - EPOCH_MS} (now ${c.clock.nowMs()})`).toBeDefined();
  expect(reply).toMatchObject({ type: 'lease.granted' });
  const taskId = reply?.type === 'lease.granted' ? reply.taskId : '';
  const granted = answeredAt ?? 0;
  expect(granted).toBeGreaterThanOrEqual(due.get(taskId) ?? Infinity);
  expect(granted).toBeLessThanOrEqual(bound());
}

describe('a long poll and delayed tasks', () => {
  it('is answered at the earliest due time (within 2 ms), however submits and clock jumps interleave', async () => {
    await fc.assert(
      fc.asyncProperty(program, async (p) => {
        await cluster?.close();
        await run(p);
      }),
      { numRuns: 150 },
    );
  });
});
