/**
 * Suite `takeover`: how fast a task moves on when its holder goes silent.
 *
 * Coordinator session TTL 500 ms, heartbeats every 100 ms. In waves of 32, each of 32 holders (raw
 * WebSocket workers, one session each) acquires its own task and heartbeats; then, staggered over
 * 200 ms, each stops heartbeating and says nothing more (its socket stays open: a paused process).
 * The coordinator judges the deadline on its own clock, as `receivedAt(last heartbeat) + TTL`; the
 * bench cannot see `receivedAt`, so it uses `sentAt(last acknowledged heartbeat) + TTL`, which is
 * at most one one-way loopback delay EARLIER than the real deadline: the latencies below are
 * upper bounds (conservative). A taker (a live session) sends a long-poll `lease.acquire {taskId,
 * waitMs}` from 20 ms before that estimate (re-sent on `lease.none`); measured: estimate → `lease.granted`, and estimate → the taker's
 * first write accepted by the sink (200 `written`). The paused holder's late write (old token) is
 * then sent too and must be refused (STALE_TOKEN). One warm-up wave runs first and is not counted.
 */
import { SinkClient } from '@leasehold/sink-client';
import type { Etcd } from './infra/etcd.js';
import { Admin, isGrant, RawWorker, type GrantFrame } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { limitRow, percentile, type BenchRow } from './report.js';

export interface TakeoverOptions {
  readonly etcd: Etcd;
  readonly takeovers: number;
  readonly log: (line: string) => void;
}

const TTL_MS = 500;
const HEARTBEAT_MS = 100;
const WAVE = 32;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runTakeoverBench(o: TakeoverOptions): Promise<BenchRow[]> {
  const stack = await startStack({
    name: 'takeover',
    etcd: o.etcd,
    sessionTtlMs: TTL_MS,
    heartbeatIntervalMs: HEARTBEAT_MS,
  });
  const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
  const sink = new SinkClient({ url: stack.sink.url, timeoutMs: 5_000 });
  const takers: RawWorker[] = [];
  const toGrant: number[] = [];
  const toWrite: number[] = [];
  const toExpired: number[] = [];
  let staleAccepted = 0;
  let failed = 0;
  let seq = 0;
  try {
    for (let i = 0; i < WAVE; i += 1) {
      const w = await RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `taker-${i}`, 100);
      w.startHeartbeats(HEARTBEAT_MS);
      takers.push(w);
    }
    // Wave 0 is a warm-up (the freshly started coordinator and sink JIT-compile their hot paths,
    // like the other suites' warm-up seconds): run, not counted.
    const waves = Math.ceil(o.takeovers / WAVE) + 1;
    for (let wave = 0; wave < waves; wave += 1) {
      const counted = wave > 0;
      const tasks = Array.from({ length: WAVE }, (_, i) => ({ taskId: `w${wave}-t${i}`, resource: `tk/${wave}/${i}` }));
      await admin.submitAll(tasks, 16);
      const holders = await Promise.all(
        tasks.map((_, i) => RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `holder-${wave}-${i}`)),
      );
      const grants = await Promise.all(
        holders.map(async (h, i) => {
          h.startHeartbeats(HEARTBEAT_MS);
          const reply = await h.acquire(`h${wave}-${i}`, tasks[i]?.taskId);
          if (!isGrant(reply)) throw new Error(`holder ${i} got ${JSON.stringify(reply)}`);
          await h.heartbeat();
          return reply;
        }),
      );
      await sleep(150);
      const finished: { taker: RawWorker; grant: GrantFrame }[] = [];
      await Promise.all(
        holders.map(async (holder, i) => {
          const taker = takers[i];
          const task = tasks[i];
          const old = grants[i];
          if (taker === undefined || task === undefined || old === undefined) return;
          await sleep((200 * i) / WAVE);
          holder.stopHeartbeats();
          // Let a heartbeat already in flight come back, so the last acknowledged one is known.
          await sleep(20);
          const deadline = holder.lastAckedHeartbeatSentAt + TTL_MS;
          holder.onPush = (frame) => {
            if (frame.type === 'session.expired' && counted) toExpired.push(performance.now() - deadline);
          };
          await sleep(Math.max(0, deadline - 20 - performance.now()));
          let grant: GrantFrame | undefined;
          while (grant === undefined && performance.now() < deadline + 5_000) {
            const reply = await taker.acquire(`k${++seq}`, task.taskId, 2_000);
            if (isGrant(reply)) grant = reply;
            else await sleep(2);
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
      await Promise.all(finished.map(({ taker, grant }) => taker.complete(grant, `result-${grant.token}`)));
      for (const h of holders) h.close();
      o.log(
        `takeover wave ${wave}/${waves - 1}${counted ? '' : ' (warm-up)'}: ${toGrant.length} so far, ` +
          `p50 ${percentile(
            [...toGrant].sort((a, b) => a - b),
            50,
          ).toFixed(1)} ms`,
      );
    }
    const g = [...toGrant].sort((a, b) => a - b);
    const w = [...toWrite].sort((a, b) => a - b);
    const x = [...toExpired].sort((a, b) => a - b);
    const n = `${g.length} takeovers, TTL ${TTL_MS} ms, heartbeat ${HEARTBEAT_MS} ms, taker long-polls lease.acquire {taskId, waitMs}`;
    return [
      limitRow({
        name: 'takeover: holder deadline → new holder granted, p99',
        value: percentile(g, 99),
        unit: 'ms',
        limit: 50,
        baseline: percentile(g, 50),
        baselineName: 'p50 of the same',
        note: n,
      }),
      limitRow({
        name: 'takeover: holder deadline → new holder first write accepted, p99',
        value: percentile(w, 99),
        unit: 'ms',
        limit: 50,
        baseline: percentile(w, 50),
        baselineName: 'p50 of the same',
      }),
      limitRow({
        name: 'takeover: holder deadline → holder told session.expired, p99',
        value: percentile(x, 99),
        unit: 'ms',
        baseline: percentile(x, 50),
        baselineName: 'p50 of the same',
        note: 'expiry judged, owner keys deleted in etcd, pushed, then the lease revoked',
      }),
      limitRow({
        name: 'takeover: late writes of paused holders accepted',
        value: staleAccepted,
        unit: 'writes',
        limit: 0,
        digits: 0,
        note: `of ${g.length} sent after the takeover; takeovers that failed: ${failed}`,
      }),
      limitRow({ name: 'takeover: failed takeovers', value: failed, unit: 'takeovers', limit: 0, digits: 0 }),
    ];
  } finally {
    for (const t of takers) t.close();
    void sink.close();
    await stack.stop();
  }
}
