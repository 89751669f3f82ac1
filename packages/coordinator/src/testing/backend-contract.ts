/**
 * The KvBackend contract: the etcd semantics the coordinator's transactions rely on, as one suite
 * run against a real etcd (`etcd-backend.int.test.ts`) and the in-memory etcd
 * (`memory-etcd.test.ts`). If the memory etcd answers differently from etcd anywhere the
 * transactions look, a test here fails on one of the two.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EtcdError } from '../errors.js';
import type { KvBackend, LeaseKeeper, Op, WatchEvent, WatchHandle } from '../etcd/backend.js';
import { cmp, Kv, op } from '../etcd/kv.js';

export interface BackendTarget {
  readonly backend: KvBackend;
  /** Let `ms` of time pass (memory: move the manual clock; etcd: wait for real). */
  pass(ms: number): Promise<void>;
  /** Compact the store's history up to `revision`. */
  compact(revision: bigint): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

/** Poll `check` until it returns true (time moves by `step` each round through `pass`). */
async function eventually(target: BackendTarget, check: () => Promise<boolean>, rounds = 60, step = 100) {
  for (let i = 0; i < rounds; i += 1) {
    if (await check()) return;
    await target.pass(step);
  }
  throw new Error('condition not reached');
}

function collect(): {
  events: WatchEvent[];
  errors: unknown[];
  disconnects: unknown[];
  listener: Parameters<KvBackend['watch']>[2];
} {
  const events: WatchEvent[] = [];
  const errors: unknown[] = [];
  const disconnects: unknown[] = [];
  return {
    events,
    errors,
    disconnects,
    listener: {
      onEvents: (batch) => {
        events.push(...batch);
      },
      onError: (err) => {
        errors.push(err);
      },
      onDisconnected: (err) => {
        disconnects.push(err);
      },
    },
  };
}

export interface BackendOpenOptions {
  /** The client's receive limit (ETCD_MAX_RESPONSE_BYTES). */
  readonly maxResponseBytes?: number;
}

export function describeBackendContract(
  name: string,
  open: (options?: BackendOpenOptions) => Promise<BackendTarget>,
): void {
  describe(`KvBackend contract: ${name}`, () => {
    let target: BackendTarget;
    let b: KvBackend;
    let p: string;
    const watches: WatchHandle[] = [];
    const keepers: LeaseKeeper[] = [];

    beforeEach(async () => {
      target = await open();
      b = target.backend;
      counter += 1;
      p = `contract/${process.pid}-${Date.now()}-${counter}/`;
    });
    afterEach(async () => {
      for (const w of watches.splice(0)) await w.cancel();
      for (const k of keepers.splice(0)) k.close();
      await target.close();
    });

    const get = async (key: string) => (await b.txn({ compare: [], success: [op.get(key)] })).responses[0]?.kvs[0];
    const put = (key: string, value = 'v', lease?: string) =>
      b.txn({ compare: [], success: [op.put(key, value, lease)] });

    it('gives every key create / mod revision and version; a txn writes at one revision', async () => {
      const first = await put(`${p}a`);
      const a1 = await get(`${p}a`);
      expect(a1).toMatchObject({
        createRevision: first.revision,
        modRevision: first.revision,
        version: 1n,
        lease: '0',
      });
      const second = await b.txn({ compare: [], success: [op.put(`${p}a`, 'w'), op.put(`${p}b`, 'x')] });
      expect(second.revision).toBe(first.revision + 1n);
      expect(await get(`${p}a`)).toMatchObject({
        value: 'w',
        createRevision: first.revision,
        modRevision: second.revision,
        version: 2n,
      });
      expect(await get(`${p}b`)).toMatchObject({ createRevision: second.revision, modRevision: second.revision });
    });

    it('does not move the revision for a read-only txn or a delete of nothing', async () => {
      const w = await put(`${p}a`);
      const read = await b.txn({ compare: [], success: [op.get(`${p}a`)] });
      expect(read.revision).toBe(w.revision);
      const none = await b.txn({ compare: [], success: [op.del(`${p}missing`)] });
      expect(none.revision).toBe(w.revision);
      const gone = await b.txn({ compare: [], success: [op.del(`${p}a`)] });
      expect(gone.revision).toBe(w.revision + 1n);
      expect(await get(`${p}a`)).toBeUndefined();
    });

    it('compares absent / present / created at / modified at, and runs the failure ops otherwise', async () => {
      const key = `${p}k`;
      const absent = await b.txn({ compare: [cmp.absent(key)], success: [op.put(key, '1')], failure: [op.get(key)] });
      expect(absent.succeeded).toBe(true);
      const again = await b.txn({ compare: [cmp.absent(key)], success: [op.put(key, '2')], failure: [op.get(key)] });
      expect(again.succeeded).toBe(false);
      expect(again.responses[0]?.kvs[0]).toMatchObject({ value: '1', createRevision: absent.revision });
      expect((await b.txn({ compare: [cmp.present(key)], success: [] })).succeeded).toBe(true);
      expect((await b.txn({ compare: [cmp.present(`${p}none`)], success: [] })).succeeded).toBe(false);
      const mod = await put(key, '3');
      expect((await b.txn({ compare: [cmp.createdAt(key, absent.revision)], success: [] })).succeeded).toBe(true);
      expect((await b.txn({ compare: [cmp.createdAt(key, mod.revision)], success: [] })).succeeded).toBe(false);
      expect((await b.txn({ compare: [cmp.modifiedAt(key, mod.revision)], success: [] })).succeeded).toBe(true);
      expect((await b.txn({ compare: [cmp.modifiedAt(key, absent.revision)], success: [] })).succeeded).toBe(false);
      // A missing key compares as all zeros.
      expect((await b.txn({ compare: [cmp.modifiedAt(`${p}none`, 0n)], success: [] })).succeeded).toBe(true);
      expect((await b.txn({ compare: [cmp.createdAt(`${p}none`, 0n)], success: [] })).succeeded).toBe(true);
    });

    it('applies all compares: one false compare fails the txn and writes nothing', async () => {
      const w = await put(`${p}x`);
      const res = await b.txn({
        compare: [cmp.present(`${p}x`), cmp.absent(`${p}x`)],
        success: [op.put(`${p}y`, '1')],
      });
      expect(res.succeeded).toBe(false);
      expect(res.revision).toBe(w.revision);
      expect(await get(`${p}y`)).toBeUndefined();
    });

    it('nested txns: each judged on the store before the request, each runs its own branch, at one revision', async () => {
      await put(`${p}taken`, 'x');
      const res = await b.txn({
        compare: [],
        success: [
          // Both judge `a` absent: on the store before the request, not after the first's put.
          op.txn({ compare: [cmp.absent(`${p}a`)], success: [op.put(`${p}a`, '1')], failure: [op.get(`${p}a`)] }),
          op.txn({ compare: [cmp.absent(`${p}a`)], success: [op.put(`${p}b`, '2')], failure: [op.get(`${p}a`)] }),
          // Fails its compare: runs its failure branch, and fails no other.
          op.txn({
            compare: [cmp.absent(`${p}taken`)],
            success: [op.put(`${p}c`, '3')],
            failure: [op.get(`${p}taken`)],
          }),
          // Its reads see the puts before it in the request.
          op.txn({ compare: [], success: [op.get(`${p}a`)] }),
        ],
      });
      expect(res.succeeded).toBe(true);
      const nested = res.responses.map((r) => r.txn);
      expect(nested.map((n) => n?.succeeded)).toEqual([true, true, false, true]);
      expect(nested[2]?.responses[0]?.kvs[0]).toMatchObject({ key: `${p}taken`, value: 'x' });
      expect(nested[3]?.responses[0]?.kvs[0]).toMatchObject({ value: '1', createRevision: res.revision });
      expect(await get(`${p}a`)).toMatchObject({ value: '1', createRevision: res.revision });
      expect(await get(`${p}b`)).toMatchObject({ value: '2', createRevision: res.revision });
      expect(await get(`${p}c`)).toBeUndefined();
      // None of them writes: the revision does not move.
      const none = await b.txn({
        compare: [],
        success: [op.txn({ compare: [cmp.absent(`${p}a`)], success: [op.put(`${p}d`, '4')] })],
      });
      expect(none.responses[0]?.txn?.succeeded).toBe(false);
      expect(none.revision).toBe(res.revision);
    });

    it('bounds a nested txn by what its parent left of the 128 operations', async () => {
      // The grant batch's shape: 32 nested txns of 4 compares, 4 success and 4 failure ops.
      const nested = (i: number, n: number) =>
        op.txn({
          compare: Array.from({ length: n }, (_, k) => cmp.absent(`${p}n/${i}/${k}`)),
          success: [op.put(`${p}n/${i}`, 'v')],
          failure: [op.get(`${p}n/${i}`)],
        });
      const fits = await b.txn({ compare: [], success: Array.from({ length: 32 }, (_, i) => nested(i, 4)) });
      expect(fits.responses.map((r) => r.txn?.succeeded)).toEqual(Array.from({ length: 32 }, () => true));
      // 32 ops at the top leave 96 for each nested list; 97 compares are too many.
      const refused = await b
        .txn({ compare: [], success: Array.from({ length: 32 }, (_, i) => nested(100 + i, i === 0 ? 97 : 1)) })
        .catch((err: unknown) => err);
      expect(refused).toMatchObject({ failure: 'too-many-ops', transient: false });
      const edge = await b.txn({
        compare: [],
        success: Array.from({ length: 32 }, (_, i) => nested(200 + i, i === 0 ? 96 : 1)),
      });
      expect(edge.responses[0]?.txn?.succeeded).toBe(true);
    });

    it('refuses a request that puts a key twice or puts and deletes it, and writes nothing of it', async () => {
      // etcd 3.4's checkIntervals, on the success list and on the failure list, nested lists included.
      const k = `${p}dup/k`;
      await put(k, 'before');
      const { revision } = await b.txn({ compare: [], success: [] });
      const nest = (success: Op[], failure: Op[] = []) => op.txn({ compare: [], success, failure });
      const outcome = (success: Op[], failure: Op[] = []) =>
        b.txn({ compare: [], success, failure }).then(
          () => 'ok',
          (err: unknown) => (err instanceof EtcdError ? err.failure : err),
        );
      const refused = {
        'two puts': [op.put(k, '1'), op.put(k, '2')],
        'a put and a delete': [op.del(k), op.put(k, '1')],
        'a put under a prefix deleted': [op.put(`${p}dup/k/1`, '1'), op.delPrefix(`${p}dup/k/`)],
        'puts in two nested txns': [nest([op.put(k, '1')]), nest([op.put(k, '2')])],
        'a nested put and a put at the top': [nest([op.put(k, '1')]), op.put(k, '2')],
        'a nested delete, then a nested put': [nest([op.del(k)]), nest([op.put(k, '1')])],
        'a delete at the top and a nested put': [op.del(k), nest([op.put(k, '1')])],
      };
      for (const [what, success] of Object.entries(refused)) {
        expect([what, await outcome(success)]).toEqual([what, 'duplicate-key']);
      }
      // The failure list is checked too, whichever branch would run.
      expect(await outcome([], [op.put(k, '1'), op.put(k, '2')])).toBe('duplicate-key');
      expect(await get(k)).toMatchObject({ value: 'before' });
      expect((await b.txn({ compare: [], success: [] })).revision).toBe(revision);

      // [success list, failure list]
      const passed: Record<string, [Op[], Op[]]> = {
        'two deletes': [[op.del(`${p}dup/d1`), op.del(`${p}dup/d1`)], []],
        'deletes in two nested txns': [[nest([op.del(`${p}dup/d2`)]), nest([op.del(`${p}dup/d2`)])], []],
        // The branches of one nested txn may put one key (only one runs).
        'one nested txn putting a key in either branch': [
          [nest([op.put(`${p}dup/e`, '1')], [op.put(`${p}dup/e`, '2')])],
          [],
        ],
        // etcd checks a nested txn's puts against the deletes before it, not its deletes against the puts.
        'a nested put, then a nested delete': [[nest([op.put(`${p}dup/f`, '1')]), nest([op.del(`${p}dup/f`)])], []],
        'the same key put in the success and in the failure list': [
          [op.put(`${p}dup/g`, '1')],
          [op.put(`${p}dup/g`, '2')],
        ],
      };
      for (const [what, [success, failure]] of Object.entries(passed)) {
        expect([what, await outcome(success, failure)]).toEqual([what, 'ok']);
      }
    });

    it('compares a prefix range: true for every key, and an empty range as one missing key', async () => {
      const empty = `${p}empty/`;
      expect((await b.txn({ compare: [cmp.allCreatedBefore(empty, 1n)], success: [] })).succeeded).toBe(true);
      const a = await put(`${p}r/a`);
      const c = await put(`${p}r/c`);
      expect((await b.txn({ compare: [cmp.allCreatedBefore(`${p}r/`, c.revision + 1n)], success: [] })).succeeded).toBe(
        true,
      );
      expect((await b.txn({ compare: [cmp.allCreatedBefore(`${p}r/`, c.revision)], success: [] })).succeeded).toBe(
        false,
      );
      expect((await b.txn({ compare: [cmp.allCreatedBefore(`${p}r/`, a.revision)], success: [] })).succeeded).toBe(
        false,
      );
    });

    it('attaches keys to leases: the lease compare, a put without a lease detaches, a missing lease fails', async () => {
      const lease = await b.grantLease(30);
      const w = await put(`${p}leased`, 'v', lease);
      expect(await get(`${p}leased`)).toMatchObject({ lease, createRevision: w.revision });
      expect((await b.txn({ compare: [cmp.leaseIs(`${p}leased`, lease)], success: [] })).succeeded).toBe(true);
      expect((await b.txn({ compare: [cmp.leaseIs(`${p}leased`, '12345')], success: [] })).succeeded).toBe(false);
      expect((await b.txn({ compare: [cmp.leaseIs(`${p}none`, '0')], success: [] })).succeeded).toBe(true);
      await put(`${p}detached`, 'v', lease);
      await put(`${p}detached`, 'v2');
      await b.revokeLease(lease);
      expect(await get(`${p}leased`)).toBeUndefined();
      expect(await get(`${p}detached`)).toMatchObject({ value: 'v2', lease: '0' });
      const before = await b.txn({ compare: [], success: [op.get(`${p}x`)] });
      await expect(put(`${p}orphan`, 'v', lease)).rejects.toThrow(/lease not found/);
      expect((await b.txn({ compare: [], success: [op.get(`${p}x`)] })).revision).toBe(before.revision);
      expect(await get(`${p}orphan`)).toBeUndefined();
      await b.revokeLease(lease); // idempotent
    });

    it('revokes a lease by deleting every key on it at one revision (seen so by a watch)', async () => {
      const lease = await b.grantLease(30);
      const start = await put(`${p}w/marker`);
      await b.txn({ compare: [], success: [op.put(`${p}w/a`, '1', lease), op.put(`${p}w/b`, '2', lease)] });
      const seen = collect();
      watches.push(await b.watch({ start: `${p}w/`, endPrefix: `${p}w/` }, start.revision + 1n, seen.listener));
      await b.revokeLease(lease);
      await eventually(target, () => Promise.resolve(seen.events.length >= 3));
      const deletes = seen.events.filter((e) => e.type === 'delete');
      expect(deletes.map((e) => e.kv.key).sort()).toEqual([`${p}w/a`, `${p}w/b`]);
      expect(new Set(deletes.map((e) => e.kv.modRevision)).size).toBe(1);
      expect(deletes[0]?.kv.modRevision).toBeGreaterThan(start.revision + 1n);
    });

    it('expires a lease that is not kept alive, and keeps one alive that is', async () => {
      const dying = await b.grantLease(1);
      const kept = await b.grantLease(1);
      await put(`${p}dying`, 'v', dying);
      await put(`${p}kept`, 'v', kept);
      const lost: string[] = [];
      const keeper = b.leaseKeeper({ intervalMs: 200, onLost: (id) => lost.push(id) });
      keepers.push(keeper);
      keeper.start();
      keeper.add(kept);
      await eventually(target, async () => (await get(`${p}dying`)) === undefined, 80);
      await target.pass(1_500);
      expect(await get(`${p}kept`)).toMatchObject({ lease: kept });
      await b.revokeLease(kept);
      await eventually(target, () => Promise.resolve(lost.includes(kept)), 40);
      expect(await get(`${p}kept`)).toBeUndefined();
    });

    it('reads a prefix page by page and at a past revision', async () => {
      const first = await b.txn({
        compare: [],
        success: ['a', 'b', 'c', 'd', 'e'].map((k) => op.put(`${p}list/${k}`, k)),
      });
      await b.txn({ compare: [], success: [op.del(`${p}list/c`), op.put(`${p}list/f`, 'f')] });
      const page1 = await b.range(`${p}list/`, { limit: 2 });
      expect(page1.kvs.map((kv) => kv.value)).toEqual(['a', 'b']);
      expect(page1.more).toBe(true);
      const page2 = await b.range(`${p}list/`, { limit: 10, fromKey: `${p}list/b\0` });
      expect(page2.kvs.map((kv) => kv.value)).toEqual(['d', 'e', 'f']);
      expect(page2.more).toBe(false);
      const past = await b.range(`${p}list/`, { limit: 10, revision: first.revision });
      expect(past.kvs.map((kv) => kv.value)).toEqual(['a', 'b', 'c', 'd', 'e']);
    });

    it('watches a key range from a revision: puts and deletes in order, a delete carries its revision', async () => {
      const before = await put(`${p}outside`);
      const seen = collect();
      watches.push(await b.watch({ start: `${p}in/a`, endPrefix: `${p}in/b` }, before.revision + 1n, seen.listener));
      const w1 = await put(`${p}in/a1`);
      await put(`${p}in/c`); // beyond the range's end prefix
      await put(`${p}in/`); // before its start
      const w2 = await b.txn({ compare: [], success: [op.put(`${p}in/b1`, 'x'), op.del(`${p}in/a1`)] });
      await eventually(target, () => Promise.resolve(seen.events.length >= 3));
      expect(seen.events.map((e) => [e.type, e.kv.key, e.kv.modRevision])).toEqual([
        ['put', `${p}in/a1`, w1.revision],
        ['put', `${p}in/b1`, w2.revision],
        ['delete', `${p}in/a1`, w2.revision],
      ]);
      expect(seen.errors).toEqual([]);
    });

    it('replays history to a watch that starts in the past', async () => {
      const w1 = await put(`${p}h/1`);
      await put(`${p}h/2`);
      const seen = collect();
      watches.push(await b.watch({ start: `${p}h/`, endPrefix: `${p}h/` }, w1.revision, seen.listener));
      await eventually(target, () => Promise.resolve(seen.events.length >= 2));
      expect(seen.events.map((e) => e.kv.key)).toEqual([`${p}h/1`, `${p}h/2`]);
    });

    it('cancels a watch that needs a compacted revision', async () => {
      const w1 = await put(`${p}c/1`);
      await put(`${p}c/2`);
      const w3 = await put(`${p}c/3`);
      await target.compact(w3.revision);
      const seen = collect();
      watches.push(await b.watch({ start: `${p}c/`, endPrefix: `${p}c/` }, w1.revision, seen.listener));
      await eventually(target, () => Promise.resolve(seen.errors.length > 0));
    });

    it('refuses a txn with more than 128 operations in one list', async () => {
      const ops = Array.from({ length: 129 }, (_, i) => op.put(`${p}many/${i}`, 'v'));
      const refused = await b.txn({ compare: [], success: ops }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(EtcdError);
      expect(refused).toMatchObject({ failure: 'too-many-ops', transient: false });
      const fits = await b.txn({ compare: [], success: ops.slice(0, 128) });
      expect(fits.succeeded).toBe(true);
    });

    it('reports its db size', async () => {
      await put(`${p}size`, 'x'.repeat(1_000));
      const status = await b.status();
      expect(status.dbSizeBytes).toBeGreaterThan(1_000);
      expect(status.noSpaceAlarm).toBe(false);
    });

    describe('a reply over the receive limit', () => {
      let limited: BackendTarget;
      beforeEach(async () => {
        limited = await open({ maxResponseBytes: 64 * 1024 });
      });
      afterEach(async () => {
        await limited.close();
      });

      it("fails that call only, as response-too-large: no breaker opens, the member's watch lives on", async () => {
        const lb = limited.backend;
        await b.txn({
          compare: [],
          success: Array.from({ length: 10 }, (_, i) => op.put(`${p}big/${i}`, 'x'.repeat(10 * 1024))),
        });
        const seen = collect();
        const start = await put(`${p}w/0`);
        watches.push(await lb.watch({ start: `${p}w/`, endPrefix: `${p}w/` }, start.revision + 1n, seen.listener));
        for (let i = 0; i < 6; i += 1) {
          const err = await lb.range(`${p}big/`, { limit: 10 }).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(EtcdError);
          expect(err).toMatchObject({ failure: 'response-too-large', transient: false, code: 'INTERNAL' });
        }
        // Six in a row: a breaker on them would be open now. The next call goes through…
        expect((await lb.range(`${p}big/`, { limit: 2 })).kvs).toHaveLength(2);
        // … and the watch opened before them still delivers (etcd3 closes a member's channels on
        // what it deems recoverable; a refusal must not count).
        const w1 = await put(`${p}w/1`);
        await eventually(limited, () => Promise.resolve(seen.events.length >= 1));
        expect(seen.events.map((e) => e.kv.modRevision)).toEqual([w1.revision]);
        expect(seen.errors).toEqual([]);
        expect(seen.disconnects).toEqual([]);
      });

      it('Kv.rangePages halves a page whose reply is over the limit, and reads every key', async () => {
        await b.txn({
          compare: [],
          success: Array.from({ length: 12 }, (_, i) =>
            op.put(`${p}pages/${String(i).padStart(2, '0')}`, 'y'.repeat(9_000)),
          ),
        });
        // A budget that believes values are small: pages of 1000 keys, 12 × 9 KB > 64 KiB.
        const kv = new Kv(limited.backend, {}, { pageBytes: 1_000_000 });
        const keys: string[] = [];
        let pages = 0;
        for await (const page of kv.rangePages(`${p}pages/`, { valueBytes: 100 })) {
          pages += 1;
          keys.push(...page.kvs.map((k) => k.key.slice(-2)));
        }
        expect(keys).toEqual(Array.from({ length: 12 }, (_, i) => String(i).padStart(2, '0')));
        expect(pages).toBeGreaterThan(1);
      });
    });
  });
}
