import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvBackend, Op, TxnResult, TxnSpec } from './backend.js';
import { CombiningBackend, MAX_COMBINED_REQUEST_BYTES, requestBytesOf } from './combining-backend.js';
import { cmp, op } from './kv.js';

function memoryEtcd(): MemoryEtcd {
  const timers = new ManualTimers(new ManualClock(1_000));
  return new MemoryEtcd({ clock: timers.clock, timers });
}

/** A backend that records every request it passes on, and how each ended. */
function recording(inner: KvBackend): { backend: KvBackend; requests: TxnSpec[]; refused: unknown[] } {
  const requests: TxnSpec[] = [];
  const refused: unknown[] = [];
  const backend: KvBackend = {
    txn: async (spec: TxnSpec): Promise<TxnResult> => {
      requests.push(spec);
      try {
        return await inner.txn(spec);
      } catch (err) {
        refused.push(err);
        throw err;
      }
    },
    range: (prefix, options) => inner.range(prefix, options),
    status: () => inner.status(),
    grantLease: (ttl) => inner.grantLease(ttl),
    revokeLease: (id) => inner.revokeLease(id),
    leaseKeeper: (options) => inner.leaseKeeper(options),
    watch: (range, from, listener) => inner.watch(range, from, listener),
    close: () => {
      inner.close();
    },
  };
  return { backend, requests, refused };
}

/** What a result says without its revision (a combined request has one revision for all its txns). */
function outcome(r: TxnResult): unknown {
  const strip = (rs: TxnResult['responses']): unknown =>
    rs.map((o) => ({
      kvs: o.kvs.map((kv) => ({ key: kv.key, value: kv.value, version: kv.version })),
      txn: o.txn === undefined ? undefined : { succeeded: o.txn.succeeded, responses: strip(o.txn.responses) },
    }));
  return { succeeded: r.succeeded, responses: strip(r.responses) };
}

async function dump(b: KvBackend): Promise<unknown> {
  const page = await b.range('', { limit: 1_000 });
  return page.kvs.map((kv) => ({ key: kv.key, value: kv.value, version: kv.version }));
}

/**
 * etcd's --max-txn-ops rule, counted on its own here: a txn's longest list plus what its neediest
 * nested txn needs (each level gets what its parent's longest list leaves), at every depth.
 */
function opsBound(spec: TxnSpec): number {
  const top = Math.max(spec.compare.length, spec.success.length, (spec.failure ?? []).length);
  let nested = 0;
  for (const o of [...spec.success, ...(spec.failure ?? [])]) {
    if (o.type === 'txn') nested = Math.max(nested, opsBound(o.txn));
  }
  return top + nested;
}

/** The UTF-8 bytes of every key and value of `spec`, at every level. */
function utf8BytesOf(spec: TxnSpec): number {
  let bytes = 0;
  for (const o of [...spec.success, ...(spec.failure ?? [])]) {
    if (o.type === 'txn') bytes += utf8BytesOf(o.txn);
    else bytes += Buffer.byteLength(o.key) + (o.type === 'put' ? Buffer.byteLength(o.value) : 0);
  }
  return bytes;
}

describe('CombiningBackend', () => {
  it('sends the write txns of one turn as one request, each answered with what it alone would get', async () => {
    const etcd = memoryEtcd();
    const rec = recording(etcd.connect());
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 32 * 1024 * 1024 });
    await combined.txn({ compare: [], success: [op.put('a', '1'), op.put('b', '1')] });
    rec.requests.length = 0;

    const specs: TxnSpec[] = [
      // compares hold: its success branch
      { compare: [cmp.present('a')], success: [op.put('a', '2'), op.get('a')], failure: [op.get('a')] },
      // compares fail: its failure branch's read
      { compare: [cmp.absent('b')], success: [op.put('b', 'x')], failure: [op.get('b')] },
      // a batch as Kv.txnEach builds it: two nested txns, one holding, one not
      {
        compare: [],
        success: [
          op.txn({ compare: [cmp.absent('c')], success: [op.put('c', '1')], failure: [] }),
          op.txn({ compare: [cmp.present('zz')], success: [op.put('d', '1')], failure: [op.get('d')] }),
        ],
      },
    ];
    const results = await Promise.all(specs.map((s) => combined.txn(s)));
    expect(rec.requests).toHaveLength(1);
    expect(new Set(results.map((r) => r.revision)).size).toBe(1);

    const alone = memoryEtcd().connect();
    await alone.txn({ compare: [], success: [op.put('a', '1'), op.put('b', '1')] });
    const expected = [];
    for (const s of specs) expected.push(outcome(await alone.txn(s)));
    expect(results.map(outcome)).toEqual(expected);
    expect(await dump(rec.backend)).toEqual(await dump(alone));
  });

  it('keeps txns apart when one writes a key another reads, compares or writes', async () => {
    const etcd = memoryEtcd();
    const rec = recording(etcd.connect());
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 32 * 1024 * 1024 });
    await rec.backend.txn({ compare: [], success: [op.put('p/1', '1')] });
    rec.requests.length = 0;
    const first = combined.txn({ compare: [cmp.absent('k')], success: [op.put('k', '1')] });
    // Compares k, which the first writes: combined, it would see k absent, which no order of the two gives.
    const second = combined.txn({ compare: [cmp.absent('k')], success: [op.put('other', '1')] });
    // Deletes a prefix that covers k: apart from both.
    const third = combined.txn({ compare: [], success: [op.delPrefix('k')] });
    // A prefix delete, and a compare over the same prefix (which, combined, would be judged before the delete).
    const fourth = combined.txn({ compare: [], success: [op.delPrefix('p/')] });
    const fifth = combined.txn({ compare: [cmp.allCreatedBefore('p/', 1n)], success: [op.put('q', '1')] });
    const [r1, r2, , , r5] = await Promise.all([first, second, third, fourth, fifth]);
    // [first, fourth], [second, fifth], [third]
    expect(rec.requests).toHaveLength(3);
    expect(r1.succeeded).toBe(true);
    expect(r2.succeeded).toBe(false);
    expect(r5.succeeded).toBe(true);
  });

  it('answers each txn on its own when etcd refuses the combined request as a whole', async () => {
    const etcd = memoryEtcd();
    const rec = recording(etcd.connect());
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 32 * 1024 * 1024 });
    const lease = await rec.backend.grantLease(10);
    await rec.backend.revokeLease(lease);
    rec.requests.length = 0;
    const [good, bad] = await Promise.allSettled([
      combined.txn({ compare: [], success: [op.put('fine', '1')] }),
      combined.txn({ compare: [], success: [op.put('leased', '1', lease)] }),
    ]);
    expect(good).toMatchObject({ status: 'fulfilled', value: { succeeded: true } });
    expect(bad).toMatchObject({ status: 'rejected', reason: { failure: 'lease-not-found' } });
    // The combined request, then each txn alone.
    expect(rec.requests).toHaveLength(3);
    expect(await dump(rec.backend)).toEqual([{ key: 'fine', value: '1', version: 1n }]);
  });

  it("keeps every request within etcd's op and byte limits; reads, large and urgent txns go at once", async () => {
    const etcd = memoryEtcd();
    const rec = recording(etcd.connect());
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 32 * 1024 * 1024 });
    const batch = (n: number, tag: string): TxnSpec => ({
      compare: [],
      success: Array.from({ length: n }, (_, i) =>
        op.txn({
          compare: [cmp.absent(`${tag}/${i}`), cmp.absent(`${tag}/${i}/h`)],
          success: [op.put(`${tag}/${i}`, 'v'.repeat(2_000)), op.put(`${tag}/${i}/h`, '1'), op.get(`${tag}/in`)],
          failure: [op.get(`${tag}/${i}`)],
        }),
      ),
    });
    const calls = Array.from({ length: 12 }, (_, i) => combined.txn(batch(30, `t${i}`)));
    // Three txns of 500 kB each: two would pass the byte limit together.
    const heavy = ['h1', 'h2', 'h3'].map((k) =>
      combined.txn({ compare: [], success: [op.put(k, 'x'.repeat(500_000))] }),
    );
    // And three of 600 kB of UTF-8 in 200,000 characters each: bytes are what etcd limits.
    const multibyte = ['m1', 'm2', 'm3'].map((k) =>
      combined.txn({ compare: [], success: [op.put(k, '€'.repeat(200_000))] }),
    );
    // A read goes at once, not at the end of the turn.
    const before = rec.requests.length;
    const read = combined.txn({ compare: [], success: [op.get('t0/0')] });
    expect(rec.requests.length).toBe(before + 1);
    // A txn near the byte limit alone goes at once too.
    const big = combined.txn({ compare: [], success: [op.put('big', 'x'.repeat(MAX_COMBINED_REQUEST_BYTES))] });
    expect(rec.requests.length).toBe(before + 2);
    // And an urgent one (a session end, a takeover's grant): at once, not at the end of the turn.
    const urgent = combined.txn({ compare: [], success: [op.put('end', '1')] }, { urgent: true });
    expect(rec.requests.length).toBe(before + 3);
    await Promise.all([...calls, ...heavy, ...multibyte, read, big, urgent]);
    expect(rec.refused).toEqual([]);
    const combinedRequests = rec.requests.slice(before + 3);
    expect(combinedRequests.length).toBeLessThan(12 + 3 + 3);
    for (const r of combinedRequests) {
      expect(opsBound(r)).toBeLessThanOrEqual(128);
      expect(requestBytesOf(r)).toBeLessThanOrEqual(MAX_COMBINED_REQUEST_BYTES);
      // Counted here on its own too (UTF-8, as gRPC sends it), not only by the rule under test.
      expect(utf8BytesOf(r)).toBeLessThanOrEqual(MAX_COMBINED_REQUEST_BYTES);
    }
  });

  it('combines txns whose nested txns nest txns of their own, within the op budget etcd gives each depth', async () => {
    const etcd = memoryEtcd();
    const rec = recording(etcd.connect());
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 32 * 1024 * 1024 });
    // As batches of 30 finishes, each carrying a grant: 5 compares, 6 success ops, the last a txn
    // of 4 compares, 4 success and 2 failure ops: each part needs 6 + 4 = 10 ops under its parent.
    const finishes = (tag: string): TxnSpec => ({
      compare: [],
      success: Array.from({ length: 30 }, (_, i) => {
        const k = `${tag}/${i}`;
        return op.txn({
          compare: [
            cmp.absent(`${k}/a`),
            cmp.absent(`${k}/b`),
            cmp.absent(`${k}/c`),
            cmp.absent(`${k}/d`),
            cmp.absent(`${k}/e`),
          ],
          success: [
            op.put(`${k}/a`, '1'),
            op.put(`${k}/b`, '1'),
            op.put(`${k}/c`, '1'),
            op.put(`${k}/d`, '1'),
            op.put(`${k}/e`, '1'),
            op.txn({
              compare: [cmp.absent(`${k}/g1`), cmp.absent(`${k}/g2`), cmp.absent(`${k}/g3`), cmp.absent(`${k}/g4`)],
              success: [op.put(`${k}/g1`, '1'), op.put(`${k}/g2`, '1'), op.put(`${k}/g3`, '1'), op.get(`${k}/in`)],
              failure: [op.get(`${k}/g1`), op.get(`${k}/g2`)],
            }),
          ],
        });
      }),
    });
    const results = await Promise.all(['f1', 'f2', 'f3', 'f4'].map((tag) => combined.txn(finishes(tag))));
    expect(rec.refused).toEqual([]);
    // Each finish and its nested grant applied, as alone.
    for (const r of results) {
      for (const part of r.responses) {
        expect(part.txn?.succeeded).toBe(true);
        expect(part.txn?.responses[5]?.txn?.succeeded).toBe(true);
      }
    }
    // Three batches fit one request (90 parts + 10), not four (120 + 10 > 128; counting the parts'
    // own lists alone, 120 + 6, would send all four, and etcd would refuse the request).
    expect(rec.requests).toHaveLength(2);
    for (const r of rec.requests) expect(opsBound(r)).toBeLessThanOrEqual(128);
  });

  it("keeps a combined reply within the client's receive limit, by the txns' reply bounds", async () => {
    const etcd = memoryEtcd();
    // The client refuses replies over 100 kB; two 60 kB reads would pass it together.
    const rec = recording(etcd.connect({ maxResponseBytes: 100_000 }));
    const combined = new CombiningBackend(rec.backend, { maxInFlight: 1, maxReplyBytes: 100_000 });
    await rec.backend.txn({
      compare: [],
      success: [op.put('big1', 'x'.repeat(60_000)), op.put('big2', 'y'.repeat(60_000))],
    });
    rec.requests.length = 0;
    const reads = ['1', '2'].map((n) =>
      combined.txn({ compare: [], success: [op.put(`w${n}`, '1'), op.get(`big${n}`)] }, { replyBytes: 61_000 }),
    );
    // A prefix read has no bound: it goes alone, at once.
    const prefixed = combined.txn({ compare: [], success: [op.put('w3', '1'), op.getPrefix('big')] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(rec.requests).toHaveLength(1);
    const results = await Promise.all(reads);
    expect(results.map((r) => r.responses[1]?.kvs[0]?.value.length)).toEqual([60_000, 60_000]);
    expect(rec.requests).toHaveLength(3);
    expect(await prefixed).toMatchObject({ failure: 'response-too-large' });
  });

  it('gives every caller the outcome of some order of the txns, one after another (property)', async () => {
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    const key = fc.constantFrom(...keys);
    const leaf: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ type: fc.constant('put' as const), key, value: fc.constantFrom('1', '2', '3') }),
      fc.record({ type: fc.constant('get' as const), key }),
      fc.record({ type: fc.constant('delete' as const), key }),
      fc.record({ type: fc.constant('delete' as const), key: fc.constantFrom('a', 'b'), prefix: fc.constant(true) }),
      fc.record({ type: fc.constant('get' as const), key: fc.constantFrom('a', 'b'), prefix: fc.constant(true) }),
    );
    const compare = fc.oneof(
      key.map((k) => cmp.absent(k)),
      key.map((k) => cmp.present(k)),
      fc.tuple(key, fc.integer({ min: 0, max: 3 })).map(([k, v]) => ({
        key: k,
        target: 'version' as const,
        result: 'less' as const,
        value: BigInt(v),
      })),
    );
    const flat = fc.record({
      compare: fc.array(compare, { maxLength: 2 }),
      success: fc.array(leaf, { minLength: 1, maxLength: 3 }),
      failure: fc.array(leaf, { maxLength: 2 }),
    });
    // A txn with a nested txn in its success (a finish carrying a grant), alone or in a batch.
    const deep: fc.Arbitrary<TxnSpec> = fc
      .tuple(flat, flat)
      .map(([outer, inner]) => ({ ...outer, success: [...outer.success, op.txn(inner)] }));
    const part = fc.oneof(flat, deep);
    const spec: fc.Arbitrary<TxnSpec> = fc.oneof(
      part,
      fc.array(part, { minLength: 2, maxLength: 3 }).map((parts) => ({ compare: [], success: parts.map(op.txn) })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(spec, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 2 }),
        async (specs, inFlight) => {
          const etcd = memoryEtcd();
          const rec = recording(etcd.connect());
          const combined = new CombiningBackend(rec.backend, {
            maxInFlight: inFlight,
            maxReplyBytes: 32 * 1024 * 1024,
          });
          await rec.backend.txn({ compare: [], success: keys.map((k) => op.put(k, '0')) });
          const settledOrder: number[] = [];
          const got = await Promise.all(
            specs.map((s, i) =>
              combined.txn(s).then(
                (r) => {
                  settledOrder.push(i);
                  return { ok: true as const, r: outcome(r) };
                },
                (e: unknown) => {
                  settledOrder.push(i);
                  return { ok: false as const, failure: (e as { failure?: string }).failure };
                },
              ),
            ),
          );
          // Each txn alone, one by one on a second etcd, in the order the requests answered (with one
          // request in flight, the order they ran; txns of one request commute, as none writes what
          // another touches); refusals included. With two in flight, only the limits are checked.
          if (inFlight === 1) {
            const alone = memoryEtcd().connect();
            await alone.txn({ compare: [], success: keys.map((k) => op.put(k, '0')) });
            const want: unknown[] = [];
            for (const i of settledOrder) {
              const s = specs[i];
              if (s === undefined) throw new Error('no spec');
              want[i] = await alone.txn(s).then(
                (r) => ({ ok: true as const, r: outcome(r) }),
                (e: unknown) => ({ ok: false as const, failure: (e as { failure?: string }).failure }),
              );
            }
            expect(got).toEqual(want);
            expect(await dump(rec.backend)).toEqual(await dump(alone));
          }
          for (const r of rec.requests) expect(opsBound(r)).toBeLessThanOrEqual(128);
        },
      ),
      { numRuns: 300 },
    );
  });
});
