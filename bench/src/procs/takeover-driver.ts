/**
 * Child process: the takeover measurement (see takeover.ts), in its own process so the bench's
 * submitter and IPC traffic never sit in its event loop. `start` runs every wave and resolves when
 * done; `stop` returns the latencies.
 *
 * Per wave of `wave` tasks: each holder (its own session) acquires its task and heartbeats; then,
 * staggered over 200 ms, each stops heartbeating and says nothing more while its socket stays
 * open (a paused process). The deadline estimate is sentAt(last acknowledged heartbeat) + TTL — at
 * most one loopback one-way delay earlier than the coordinator's receivedAt + TTL, so the latencies
 * are upper bounds. A taker (a live session) long-polls `lease.acquire {taskId, waitMs}` from 20 ms
 * before the estimate. Measured: estimate → taker's `lease.granted`; → taker's first write accepted
 * by the sink; → holder told `session.expired`. The holder's late write (old token) must be refused.
 */
import { SinkClient } from '@leasehold/sink-client';
import { Admin, isGrant, RawWorker, type GrantFrame } from '../infra/raw-worker.js';
import { serve } from './protocol.js';

interface Params {
  readonly coordinatorUrl: string;
  readonly sinkUrl: string;
  readonly workerKey: string;
  readonly adminKey: string;
  readonly takeovers: number;
  readonly wave: number;
  readonly ttlMs: number;
  readonly heartbeatMs: number;
  /** Prefix of every task id, resource and worker id: one driver process per phase of the suite. */
  readonly tag: string;
}

/** The suite's own queue: the background cycle's SDK workers (queue `default`) never take its tasks. */
const QUEUE_NAME = 'takeover';
const QUEUE = [QUEUE_NAME];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const toGrant: number[] = [];
const toWrite: number[] = [];
const toExpired: number[] = [];
/** Per counted wave, its slowest deadline → grant (ms): whether one wave sets the p99, or all do. */
const waveWorst: number[] = [];
let staleAccepted = 0;
let failed = 0;
let holderSetupFailed = 0;
let holderReply = '';
let takerReply = '';
let takerSessionsLost = 0;
let seq = 0;

async function run(p: Params): Promise<void> {
  const admin = new Admin(p.coordinatorUrl, p.adminKey);
  const sink = new SinkClient({ url: p.sinkUrl, timeoutMs: 5_000 });
  const takers: RawWorker[] = [];
  try {
    for (let i = 0; i < p.wave; i += 1) {
      const w = await RawWorker.open(p.coordinatorUrl, p.workerKey, `${p.tag}taker-${i}`, 100, QUEUE);
      w.startHeartbeats(p.heartbeatMs);
      takers.push(w);
    }
    // Wave 0 is a warm-up (JIT of the hot paths): run, not counted.
    // Until `takeovers` are counted (a wave can lose holders that never got their grant), at most
    // twice the planned waves.
    const maxWaves = 2 * Math.ceil(p.takeovers / p.wave) + 1;
    for (let wave = 0; wave < maxWaves && toGrant.length + failed < p.takeovers; wave += 1) {
      const counted = wave > 0;
      const tasks = Array.from({ length: p.wave }, (_, i) => ({
        taskId: `${p.tag}w${wave}-t${i}`,
        resource: `tk/${p.tag}${wave}/${i}`,
        queue: QUEUE_NAME,
      }));
      const refused = await admin.submitBatch(tasks);
      if (refused > 0) throw new Error(`${refused} takeover tasks refused`);
      const holders = await Promise.all(
        tasks.map(async (_, i) => {
          const h = await RawWorker.open(p.coordinatorUrl, p.workerKey, `${p.tag}holder-${wave}-${i}`, 1, QUEUE);
          h.startHeartbeats(p.heartbeatMs);
          return h;
        }),
      );
      // A holder whose session could not get its grant (e.g. it expired on a starved machine
      // before the acquire was answered) is left out of this wave and counted apart.
      const grants = await Promise.all(
        holders.map(async (h, i) => {
          const reply = await h.acquire(`h${wave}-${i}`, tasks[i]?.taskId);
          if (!isGrant(reply)) {
            holderSetupFailed += 1;
            holderReply ||= JSON.stringify(reply).slice(0, 200);
            return undefined;
          }
          await h.heartbeat();
          return reply;
        }),
      );
      await sleep(150);
      const finished: { taker: RawWorker; grant: GrantFrame }[] = [];
      const grantedBefore = toGrant.length;
      await Promise.all(
        holders.map(async (holder, i) => {
          let taker = takers[i];
          const task = tasks[i];
          const old = grants[i];
          if (taker === undefined || task === undefined || old === undefined) return;
          await sleep((200 * i) / p.wave);
          holder.stopHeartbeats();
          await sleep(20); // a heartbeat in flight comes back: the last acknowledged one is known
          const deadline = holder.lastAckedHeartbeatSentAt + p.ttlMs;
          holder.onPush = (frame) => {
            if (frame.type === 'session.expired' && counted) toExpired.push(performance.now() - deadline);
          };
          await sleep(Math.max(0, deadline - 20 - performance.now()));
          let grant: GrantFrame | undefined;
          while (grant === undefined && performance.now() < deadline + 5_000) {
            const reply = await taker.acquire(`k${++seq}`, task.taskId, 2_000);
            if (isGrant(reply)) grant = reply;
            else if (reply.type === 'error' && reply.code === 'SESSION_EXPIRED') {
              // The taker's own session expired (a starved machine): open a new one and go on.
              takerSessionsLost += 1;
              taker.close();
              taker = await RawWorker.open(p.coordinatorUrl, p.workerKey, `${p.tag}taker-${i}-${++seq}`, 100, QUEUE);
              taker.startHeartbeats(p.heartbeatMs);
              takers[i] = taker;
            } else {
              if (reply.type !== 'lease.none') takerReply ||= JSON.stringify(reply).slice(0, 200);
              await sleep(2);
            }
          }
          if (grant === undefined) {
            if (counted) failed += 1;
            return;
          }
          const grantedAt = performance.now();
          const written = await sink.write({
            resource: grant.resource,
            token: BigInt(grant.token),
            resultId: `result-${grant.token}`,
            workerId: taker.workerId,
            incarnation: taker.incarnation,
            capability: grant.capability,
            payload: { by: taker.workerId },
          });
          const writtenAt = performance.now();
          if (!written.ok) {
            if (counted) failed += 1;
            return;
          }
          if (counted) {
            toGrant.push(grantedAt - deadline);
            toWrite.push(writtenAt - deadline);
          }
          // The paused holder wakes up and writes with its old token: must be refused.
          const stale = await sink.write({
            resource: old.resource,
            token: BigInt(old.token),
            resultId: `stale-${old.token}`,
            workerId: holder.workerId,
            incarnation: holder.incarnation,
            capability: old.capability,
            payload: { by: holder.workerId },
          });
          if (stale.ok) staleAccepted += 1; // counted in every wave: must never happen
          finished.push({ taker, grant });
        }),
      );
      if (toGrant.length > grantedBefore) waveWorst.push(Math.max(...toGrant.slice(grantedBefore)));
      await Promise.all(finished.map(({ taker, grant }) => taker.complete(grant, `result-${grant.token}`)));
      for (const h of holders) h.close();
    }
  } finally {
    for (const t of takers) t.close();
    void sink.close();
    await admin.close();
  }
}

serve<Params>({
  start: run,
  sample: () => ({ ops: toGrant.length, errors: failed }),
  stop: () => {
    const r = (xs: number[]) => xs.map((x) => Math.round(x * 100) / 100);
    return Promise.resolve({
      toGrant: r(toGrant),
      toWrite: r(toWrite),
      toExpired: r(toExpired),
      waveWorst: r(waveWorst),
      staleAccepted,
      failed,
      holderSetupFailed,
      holderReply,
      takerReply,
      takerSessionsLost,
    });
  },
});
