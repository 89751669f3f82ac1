/**
 * Child process: an etcd baseline from its own etcd3 client (one gRPC channel, as the coordinator
 * uses), `lanes` loops in flight:
 *   - `rawTxn`: a create-if-absent txn with a lease on a fresh key (compare create_revision == 0,
 *     put with the lease) — the least etcd work a grant can be; the lease is revoked on stop;
 *   - `lock`: etcd3's Lock acquire + release of a fresh key.
 */
import { Etcd3 } from 'etcd3';
import { serve, type Counters } from './protocol.js';

interface Params {
  readonly endpoint: string;
  readonly prefix: string;
  readonly lanes: number;
  readonly mode: 'rawTxn' | 'lock';
  readonly tag: string;
}

let client: Etcd3 | undefined;
const counters: Counters = { ops: 0, errors: 0 };
let running = false;
let loops: Promise<void>[] = [];
let leaseId = '';

async function loop(c: Etcd3, lane: number, p: Params): Promise<void> {
  for (let n = 0; running; n += 1) {
    try {
      if (p.mode === 'rawTxn') {
        const key = Buffer.from(`${p.prefix}raw/${p.tag}/${lane}/${n}`);
        const res = await c.kv.txn({
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
          success: [{ request_put: { key, value: Buffer.from('x'), lease: leaseId } }],
          failure: [],
        });
        if (res.succeeded) counters.ops += 1;
        else counters.errors += 1;
      } else {
        const lock = c.lock(`${p.prefix}lock/${p.tag}/${lane}/${n}`).ttl(30);
        await lock.acquire();
        await lock.release();
        counters.ops += 1;
      }
    } catch {
      counters.errors += 1;
    }
  }
}

serve<Params>({
  async start(p) {
    client ??= new Etcd3({ hosts: [p.endpoint] });
    const c = client;
    counters.ops = 0;
    counters.errors = 0;
    if (p.mode === 'rawTxn') leaseId = (await c.leaseClient.leaseGrant({ TTL: 60 })).ID;
    running = true;
    loops = Array.from({ length: p.lanes }, (_, lane) => loop(c, lane, p));
  },
  sample: () => counters,
  async stop() {
    running = false;
    await Promise.all(loops);
    if (leaseId !== '' && client !== undefined) await client.leaseClient.leaseRevoke({ ID: leaseId });
    leaseId = '';
    return {};
  },
});
