/**
 * MAX_SESSIONS_PER_WORKER on the real SessionManager (in-memory etcd, manual clock): one worker id
 * holds at most that many sessions on a coordinator, counted when the hello is accepted — so
 * concurrent hellos cannot all pass — and given back when a session ends here. Resuming a session
 * already served here takes no slot; other workers are not affected.
 *
 * Mechanism: `#takeSlot` in SessionManager.open (core/slots.ts). Remove it and the fourth hello
 * opens a fourth session; check the count before `#create`'s await but take the slot after it (the
 * order that let 300 event streams through) and all six concurrent hellos open; drop the release
 * in `#forget` and no session opens after the first three expire.
 */
import { LeaseholdError } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import {
  eachServiceCluster,
  RecordingChannel,
  type ServiceCluster,
  type TestCoordinator,
} from '../testing/service-harness.js';

const TTL = 3_000;
let cluster: ServiceCluster;
let c1: TestCoordinator;

eachServiceCluster(
  (c, first) => {
    cluster = c;
    c1 = first;
  },
  { MAX_SESSIONS_PER_WORKER: '3', SESSION_TTL_MS: String(TTL) },
);

const open = (workerId: string, incarnation: string, resumeSessionId?: string) =>
  c1.services.sessions.open(
    { ...cluster.hello(workerId, incarnation), ...(resumeSessionId === undefined ? {} : { resumeSessionId }) },
    new RecordingChannel(),
  );

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'opened',
    (err: unknown) => (err instanceof LeaseholdError ? err.code : String(err)),
  );

describe('sessions per worker', () => {
  it('the fourth session of one worker is refused with LIMIT_REACHED; other workers are not', async () => {
    const first = await open('w1', 'i1');
    await open('w1', 'i2');
    await open('w1', 'i3');
    expect(await refusal(open('w1', 'i4'))).toBe('LIMIT_REACHED');
    expect(await refusal(open('w2', 'i1'))).toBe('opened');
    // A resume of one already served here takes no slot.
    const again = await open('w1', 'i1', first.session.sessionId);
    expect(again).toMatchObject({ resumed: true, session: { sessionId: first.session.sessionId } });
    expect(await refusal(open('w1', 'i4'))).toBe('LIMIT_REACHED');
  });

  it('counts at accept: six hellos at once open exactly three sessions', async () => {
    const outcomes = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((inc) => refusal(open('w1', inc))));
    expect(outcomes.filter((o) => o === 'opened')).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'LIMIT_REACHED')).toHaveLength(3);
  });

  it('a session that ends here gives its slot back', async () => {
    await open('w1', 'i1');
    await open('w1', 'i2');
    await open('w1', 'i3');
    expect(await refusal(open('w1', 'i4'))).toBe('LIMIT_REACHED');
    await cluster.advance(TTL + 10); // no heartbeats: all three expire and end
    expect(await refusal(open('w1', 'i4'))).toBe('opened');
  });
});
