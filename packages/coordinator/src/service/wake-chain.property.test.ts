/**
 * Waiting long polls and what a change wakes (core/waiting-acquires.ts), on the real services, the
 * in-memory etcd and a manual clock.
 *
 * - A task wakes the acquires it needs, not every one waiting: with 20 polls waiting on a queue,
 *   one task costs two selects (the one that takes it, and the next, which finds nothing and ends
 *   the chain), not twenty. A delayed task coming due is such a change (the grant service's one due
 *   timer), so its due time wakes no more: before, every poll waiting on any queue had timed its
 *   wait by the earliest due time, and each selected at it. A poll for one task id wakes when that
 *   task became grantable: 20 such polls cost one select per task, not 20.
 * - No wake is lost: over random programs — sessions serving random queues, polls on all of their
 *   queues, a subset, or one task id, tasks submitted alone or several at once in random queues —
 *   after every change has settled no waiting poll could select a task. Removing the hand-on of a
 *   chain (an acquire that took a task waking the next) or starting one chain for several readied
 *   queues makes this fail.
 */
import fc from 'fast-check';
import type { CoordinatorMessage } from '@leasehold/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceCluster, type TestCoordinator } from '../testing/service-harness.js';

const WAIT_MS = 10_000;
const QUEUES = ['a', 'b', 'c'] as const;

let cluster: ServiceCluster | undefined;

afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

/** Count the index's selects from now on. */
function countSelects(c: TestCoordinator): { readonly n: number } {
  const index = c.services.index;
  const select = index.select.bind(index);
  const counter = { n: 0 };
  index.select = (query) => {
    counter.n += 1;
    return select(query);
  };
  return counter;
}

describe('waiting long polls', () => {
  it('a task wakes the poll that takes it and the one after, not every poll waiting', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const answers: CoordinatorMessage[] = [];
    for (let i = 0; i < 20; i += 1) {
      const w = await c.worker(c1, `w${i}`);
      void c.acquire(w, { waitMs: WAIT_MS }).then((reply) => answers.push(reply));
    }
    await c.settle();
    const selects = countSelects(c1);

    await c.submit(c1, 't0', 'r0');
    expect(answers.map((a) => a.type)).toEqual(['lease.granted']);
    expect(selects.n).toBeLessThanOrEqual(2);

    for (let i = 1; i <= 5; i += 1) void c1.services.tasks.submit({ taskId: `t${i}`, resource: `r${i}`, payload: {} });
    await c.settle();
    expect(answers.map((a) => a.type)).toEqual(Array.from({ length: 6 }, () => 'lease.granted'));
    // Each task: the select that takes it, at most one that finds nothing per chain.
    expect(selects.n).toBeLessThanOrEqual(2 + 2 * 5);
  });

  it('delayed tasks due together are taken by as many waiting polls at their due time', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const answers: CoordinatorMessage[] = [];
    for (let i = 0; i < 3; i += 1) {
      const w = await c.worker(c1, `w${i}`);
      void c.acquire(w, { waitMs: WAIT_MS }).then((reply) => answers.push(reply));
    }
    await c.settle();
    // Submitted after the polls began to wait, each earlier than the one before: the due timer
    // must be set earlier each time.
    await c.submit(c1, 'late', 'r-late', {}, { delayMs: 50 });
    await c.submit(c1, 'early-1', 'r1', {}, { delayMs: 20 });
    await c.submit(c1, 'early-2', 'r2', {}, { delayMs: 20 });
    await c.advance(21);
    expect(answers.map((a) => (a.type === 'lease.granted' ? a.taskId : a.type)).sort()).toEqual(['early-1', 'early-2']);
    await c.advance(30);
    expect(answers).toHaveLength(3);
  });

  it('a due time wakes the chain of its queue only: two selects, not one per waiting poll', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const answers: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const queue = i % 2 === 0 ? 'a' : 'b';
      const w = await c.worker(c1, `w${i}`, 'inc-1', 100, [queue]);
      void c.acquire(w, { waitMs: WAIT_MS }).then((reply) => answers.push(`${queue}:${reply.type}`));
    }
    await c.settle();
    await c.submit(c1, 'd', 'r', {}, { delayMs: 20, queue: 'a' });
    const selects = countSelects(c1);
    await c.advance(20);
    expect(answers).toEqual(['a:lease.granted']);
    expect(selects.n).toBeLessThanOrEqual(2);
  });

  it('a task wakes the polls waiting for its task id only, not every poll for one task of its queue', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const answers: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const w = await c.worker(c1, `w${i}`);
      void c.acquire(w, { waitMs: WAIT_MS, taskId: `t${i}` }).then((reply) => {
        answers.push(`w${i}:${reply.type === 'lease.granted' ? reply.taskId : reply.type}`);
      });
    }
    await c.settle();
    const selects = countSelects(c1);
    await c.submit(c1, 't7', 'r7');
    expect(answers).toEqual(['w7:t7']);
    expect(selects.n).toBe(1); // was 20: every poll of the queue selected
    for (let i = 0; i < 20; i += 1) {
      if (i !== 7) await c.submit(c1, `t${i}`, `r${i}`);
    }
    expect(answers).toHaveLength(20);
    expect(selects.n).toBe(20); // one each (was 20 + 19 + … + 1 = 210)
  });

  it('a chain head whose session ended between its wake and its select passes the wake on', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const w0 = await c.worker(c1, 'w0');
    await c.advance(1_000);
    const w1 = await c.worker(c1, 'w1'); // its deadline is a second after w0's
    const answers = new Map<string, CoordinatorMessage>();
    void c.acquire(w0, { waitMs: 30_000 }).then((reply) => answers.set('w0', reply));
    void c.acquire(w1, { waitMs: 30_000 }).then((reply) => answers.set('w1', reply));
    await c.settle();
    // w0's deadline passes, unseen by the timers: its session has ended (no longer live) but is
    // not yet ended by its deadline timer, which would have woken it without a baton.
    c.clock.advance(59_500);
    await c.submit(c1, 't', 'r');
    expect(answers.get('w0')).toMatchObject({ type: 'error', code: 'SESSION_EXPIRED' });
    expect(answers.get('w1')).toMatchObject({ type: 'lease.granted', taskId: 't' });
  });

  it('after close() (what an etcd outage does) woke the waiting polls, a poll still wakes at a due time', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const w = await c.worker(c1, 'w0');
    await c.submit(c1, 'd', 'r', {}, { delayMs: 50 });
    let answer: CoordinatorMessage | undefined;
    void c.acquire(w, { waitMs: WAIT_MS }).then((reply) => (answer = reply));
    await c.settle();
    // The coordinator serves on afterwards (its sessions were handed off; this one is still live,
    // so its poll selects again and waits again).
    c1.services.grants.close();
    await c.settle();
    expect(answer).toBeUndefined();
    await c.advance(50);
    expect(answer).toMatchObject({ type: 'lease.granted', taskId: 'd' });
  });

  it('a delayed task is taken at its due time by the next waiting poll of its queue when the oldest has ended', async () => {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const w0 = await c.worker(c1, 'w0');
    const w1 = await c.worker(c1, 'w1');
    const answers = new Map<string, CoordinatorMessage>();
    void c.acquire(w0, { waitMs: WAIT_MS }).then((reply) => answers.set('w0', reply));
    void c.acquire(w1, { waitMs: WAIT_MS }).then((reply) => answers.set('w1', reply));
    await c.settle();
    await c.submit(c1, 'd', 'r', {}, { delayMs: 20 });
    // The oldest poll ends (its worker closes) before the due time: the other must wake at it.
    c1.services.grants.drain(w0.session);
    await c.settle();
    expect(answers.get('w0')?.type).toBe('lease.none');
    await c.advance(21);
    expect(answers.get('w1')).toMatchObject({ type: 'lease.granted', taskId: 'd' });
  });

  interface Program {
    /** Each session's queues (indexes into QUEUES, non-empty). */
    readonly sessions: readonly (readonly number[])[];
    readonly polls: readonly {
      readonly session: number;
      /** all: the session's queues; some: a subset named by the acquire; task: one task id. */
      readonly kind: 'all' | 'some' | 'task';
      readonly pick: number;
    }[];
    /** Groups of tasks submitted together (one wake round or several), in order: queue, delay (ms). */
    readonly submits: readonly (readonly (readonly [number, number])[])[];
  }

  const queueSet = fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 3 });
  const program: fc.Arbitrary<Program> = fc.record({
    sessions: fc.array(queueSet, { minLength: 1, maxLength: 4 }),
    polls: fc.array(
      fc.record({ session: fc.nat(3), kind: fc.constantFrom('all', 'all', 'some', 'task'), pick: fc.nat(7) }),
      { minLength: 1, maxLength: 10 },
    ),
    submits: fc.array(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.constantFrom(0, 0, 0, 5, 15)), {
        minLength: 1,
        maxLength: 4,
      }),
      { minLength: 1, maxLength: 4 },
    ),
  });

  async function run(p: Program): Promise<void> {
    const c = (cluster = new ServiceCluster({ SESSION_TTL_MS: '60000' }));
    const c1 = await c.coordinator('c1');
    const workers = [];
    for (const [i, qs] of p.sessions.entries()) {
      workers.push({
        handle: await c.worker(
          c1,
          `w${i}`,
          'inc-1',
          100,
          qs.map((q) => QUEUES[q] ?? 'a'),
        ),
        qs,
      });
    }
    const polls: { queues: readonly string[]; taskId?: string; answer?: CoordinatorMessage }[] = [];
    for (const poll of p.polls) {
      const w = workers[poll.session % workers.length];
      if (w === undefined) continue;
      const own = w.qs.map((q) => QUEUES[q] ?? 'a');
      const entry: (typeof polls)[number] =
        poll.kind === 'task'
          ? { queues: own, taskId: `t${poll.pick}` }
          : { queues: poll.kind === 'some' ? [own[poll.pick % own.length] ?? 'a'] : own };
      polls.push(entry);
      const options =
        poll.kind === 'task'
          ? { waitMs: WAIT_MS, taskId: `t${poll.pick}` }
          : poll.kind === 'some'
            ? { waitMs: WAIT_MS, queues: entry.queues }
            : { waitMs: WAIT_MS };
      void c.acquire(w.handle, options).then((reply) => {
        entry.answer = reply;
      });
    }
    await c.settle();
    const check = (): void => {
      for (const [i, poll] of polls.entries()) {
        if (poll.answer !== undefined) {
          expect(poll.answer.type, `poll ${i}`).toBe('lease.granted');
          continue;
        }
        const could = c1.services.index.select(
          poll.taskId === undefined ? { queues: poll.queues } : { queues: poll.queues, taskId: poll.taskId },
        );
        expect(could, `poll ${i} (${JSON.stringify(poll)}) still waits while it could take a task`).toEqual([]);
      }
    };
    let n = 0;
    for (const group of p.submits) {
      for (const [q, delayMs] of group) {
        const id = n++;
        void c1.services.tasks.submit({
          taskId: `t${id}`,
          resource: `r${id}`,
          payload: {},
          queue: QUEUES[q] ?? 'a',
          ...(delayMs > 0 ? { delayMs } : {}),
        });
      }
      await c.settle();
      await c.advance(1);
      check();
    }
    // Every delayed task has come due: the polls that could take one were woken at its due time.
    await c.advance(20);
    check();
  }

  it('no waiting poll could take a task once changes have settled, however polls and submits mix', async () => {
    await fc.assert(
      fc.asyncProperty(program, async (p) => {
        await cluster?.close();
        await run(p);
      }),
      { numRuns: 150 },
    );
  });
});
