/**
 * The etcd baselines, driven from the bench process with one etcd3 client (one gRPC channel, as
 * the coordinator uses): `lanes` concurrent loops for a fixed time, each loop doing
 * - `rawTxn`: one create-if-absent txn with a lease (compare create_revision == 0, put key with the
 *   lease) on a fresh key — the least etcd work a grant can be;
 * - `lock`: etcd3's `Lock` acquire + release of a fresh key (lease grant, txn, release revokes).
 */
import { Etcd3 } from 'etcd3';

export interface LoopResult {
  readonly ops: number;
  readonly errors: number;
  readonly seconds: number;
  readonly perSecond: number;
}

/** Run `lanes` loops of `op` for `seconds` (after `warmupSeconds` not counted). */
export async function runLanes(
  lanes: number,
  seconds: number,
  warmupSeconds: number,
  op: (lane: number, n: number) => Promise<boolean>,
): Promise<LoopResult> {
  const start = performance.now();
  const measureFrom = start + warmupSeconds * 1000;
  const end = measureFrom + seconds * 1000;
  let ops = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let n = 0; performance.now() < end; n += 1) {
        let ok = false;
        try {
          ok = await op(lane, n);
        } catch {
          ok = false;
        }
        const at = performance.now();
        if (at < measureFrom || at > end) continue;
        if (ok) ops += 1;
        else errors += 1;
      }
    }),
  );
  return { ops, errors, seconds, perSecond: ops / seconds };
}

export class EtcdBaselines {
  readonly client: Etcd3;
  readonly #prefix: string;
  #round = 0;

  constructor(endpoint: string, prefix: string) {
    this.client = new Etcd3({ hosts: [endpoint] });
    this.#prefix = prefix;
  }

  /** Create-if-absent txns with a lease, `lanes` in flight. */
  async rawTxn(lanes: number, seconds: number, warmupSeconds = 1): Promise<LoopResult> {
    const round = ++this.#round;
    const { ID: leaseId } = await this.client.leaseClient.leaseGrant({ TTL: 60 });
    try {
      return await runLanes(lanes, seconds, warmupSeconds, async (lane, n) => {
        const key = Buffer.from(`${this.#prefix}raw/${round}/${lane}/${n}`);
        const res = await this.client.kv.txn({
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
          success: [{ request_put: { key, value: Buffer.from('x'), lease: leaseId } }],
          failure: [],
        });
        return res.succeeded;
      });
    } finally {
      await this.client.leaseClient.leaseRevoke({ ID: leaseId });
    }
  }

  /** etcd3 Lock acquire + release of a fresh key per iteration, `lanes` in flight. */
  async lock(lanes: number, seconds: number, warmupSeconds = 1): Promise<LoopResult> {
    const round = ++this.#round;
    return runLanes(lanes, seconds, warmupSeconds, async (lane, n) => {
      const lock = this.client.lock(`${this.#prefix}lock/${round}/${lane}/${n}`).ttl(30);
      await lock.acquire();
      await lock.release();
      return true;
    });
  }

  close(): void {
    this.client.close();
  }
}
