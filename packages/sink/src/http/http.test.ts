import { signCapability, signVouch, type VouchedGrant } from '@leasehold/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Sink } from '../sink.js';
import { describeFenceContract } from '../testing/contract.js';
import {
  CAPABILITY_KEY,
  COORDINATOR_KEY,
  INCARNATION,
  OLD_CAPABILITY_KEY,
  OLD_COORDINATOR_KEY,
  READ_KEY,
  sign,
} from '../testing/fixtures.js';
import { injectTarget, openInjectSink } from '../testing/targets.js';

describeFenceContract('HTTP app (inject)', injectTarget);

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('HTTP auth, health and metrics', () => {
  let sink: Sink;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ sink, cleanup } = await openInjectSink());
  });
  afterEach(async () => {
    await cleanup();
  });

  const advance = (headers: Record<string, string>, token = '1') =>
    sink.app.inject({ method: 'POST', url: '/v1/fences/advance', payload: { resource: 'r', token }, headers });

  const write = (capability: string, overrides: Record<string, unknown> = {}) =>
    sink.app.inject({
      method: 'POST',
      url: '/v1/writes',
      payload: {
        resource: 'r',
        token: '1',
        resultId: 'x',
        workerId: 'w',
        incarnation: INCARNATION,
        capability,
        payload: { v: 1 },
        ...overrides,
      },
    });

  it('accepts every configured coordinator key (rotation) and refuses others', async () => {
    expect((await advance(bearer(COORDINATOR_KEY), '1')).statusCode).toBe(200);
    expect((await advance(bearer(OLD_COORDINATOR_KEY), '2')).statusCode).toBe(200);
    const wrong = await advance(bearer('not-a-configured-key-00000000'), '3');
    expect(wrong.statusCode).toBe(401);
    expect(wrong.headers['www-authenticate']).toBe('Bearer');
    expect(wrong.json()).toMatchObject({ type: 'error', code: 'UNAUTHENTICATED', retryable: false });
    expect((await advance({ authorization: `Basic ${COORDINATOR_KEY}` }, '3')).statusCode).toBe(401);
  });

  it('a read-only key reads but may not advance (403)', async () => {
    const refused = await advance(bearer(READ_KEY));
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'FORBIDDEN' });
    const read = await sink.app.inject({ url: '/v1/resources/r', headers: bearer(READ_KEY) });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual({ resource: 'r', fence: '0', results: [], next: '0', hasMore: false });
    expect((await sink.app.inject({ url: '/v1/decisions', headers: bearer(READ_KEY) })).statusCode).toBe(200);
  });

  it('writes need a capability for (resource, token, workerId, incarnation) under a live public key', async () => {
    await advance(bearer(COORDINATOR_KEY), '1');
    const forWorker = signCapability(OLD_CAPABILITY_KEY, {
      resource: 'r',
      token: 1n,
      workerId: 'w',
      incarnation: INCARNATION,
    });
    expect((await write(sign('r', 1n, 'w', 'other-incarnation'))).statusCode).toBe(403);
    expect((await write(sign('r', 1n, 'other-worker'))).json()).toMatchObject({ code: 'FORBIDDEN' });
    expect((await write(sign('r', 2n, 'w'))).statusCode).toBe(403);
    expect((await write('v1.k9.AAAA')).statusCode).toBe(403);
    // A v1 capability (HMAC) is never accepted, whatever its MAC.
    expect((await write(`v1.k2.${'A'.repeat(43)}`)).statusCode).toBe(403);
    // The correct token alone is not enough, but a capability from the older key still verifies.
    const ok = await write(forWorker);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ resource: 'r', resultId: 'x', outcome: 'written', fence: '1' });
  });

  it('a refused write is a 409 with the current fence', async () => {
    await advance(bearer(COORDINATOR_KEY), '2');
    const stale = await write(sign('r', 1n, 'w'));
    expect(stale.statusCode).toBe(409);
    expect(stale.json()).toEqual({
      type: 'error',
      code: 'STALE_TOKEN',
      message: expect.any(String) as string,
      retryable: false,
      fence: '2',
    });
  });

  it('serves results of ids with slashes, URL-encoded, and 404 for a missing result', async () => {
    await sink.app.inject({
      method: 'POST',
      url: '/v1/fences/advance',
      payload: { resource: 'tenant/a/jobs', token: '3' },
      headers: bearer(COORDINATOR_KEY),
    });
    const w = await write(sign('tenant/a/jobs', 3n, 'w'), {
      resource: 'tenant/a/jobs',
      token: '3',
      resultId: 'task:a/1',
    });
    expect(w.statusCode).toBe(200);
    const got = await sink.app.inject({
      url: `/v1/resources/${encodeURIComponent('tenant/a/jobs')}/results/${encodeURIComponent('task:a/1')}`,
      headers: bearer(COORDINATOR_KEY),
    });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({
      resource: 'tenant/a/jobs',
      resultId: 'task:a/1',
      token: '3',
      payload: { v: 1 },
    });
    const missing = await sink.app.inject({ url: '/v1/resources/r/results/nope', headers: bearer(COORDINATOR_KEY) });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ type: 'error', code: 'NOT_FOUND' });
  });

  it('health, readiness and metrics are open; metrics count outcomes, batches and commit latency', async () => {
    await advance(bearer(COORDINATOR_KEY), '1');
    await advance(bearer(COORDINATOR_KEY), '1');
    await write(sign('r', 1n, 'w'));
    await write('v1.k2.bad');
    expect((await sink.app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await sink.app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const metrics = await sink.app.inject({ url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toContain('text/plain');
    const text = metrics.body;
    expect(text).toContain('leasehold_sink_advances_total{outcome="advanced"} 1');
    expect(text).toContain('leasehold_sink_advances_total{outcome="unchanged"} 1');
    expect(text).toContain('leasehold_sink_writes_total{outcome="written"} 1');
    expect(text).toContain('leasehold_sink_writes_total{outcome="forbidden"} 1');
    expect(text).toContain('leasehold_sink_http_requests_total{route="/v1/writes",status="403"} 1');
    expect(text).toContain('leasehold_sink_http_requests_total{route="/v1/fences/advance",status="200"} 2');
    expect(text).toMatch(/leasehold_sink_batch_ops_count 3/);
    expect(text).toMatch(/leasehold_sink_commit_seconds_count 3/);
  });

  it('after close begins, readiness fails and new requests get 503 SHUTTING_DOWN', async () => {
    const closing = sink.close();
    const ready = await sink.app.inject({ url: '/readyz' }).catch(() => undefined);
    if (ready !== undefined) {
      expect(ready.statusCode).toBe(503);
      expect(ready.headers['retry-after']).toBe('1');
      expect(ready.json()).toMatchObject({ code: 'SHUTTING_DOWN', retryable: true });
    }
    await closing;
    await expect(sink.service.advance({ resource: 'r', token: 1n })).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });
});

describe('advance vouches (POST /v1/fences/advance-batch with grants)', () => {
  let sink: Sink;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ sink, cleanup } = await openInjectSink());
  });
  afterEach(async () => {
    await cleanup();
  });

  /** Canonical in form, signed by nobody: only a valid vouch lets a write carry it. */
  const UNSIGNED = `v2.${CAPABILITY_KEY.id}.${'A'.repeat(85)}A`;
  const grantOf = (capability: string) => ({ workerId: 'w', incarnation: INCARNATION, capability });
  const vouchedGrant = (resource: string, token: string, capability: string): VouchedGrant => ({
    resource,
    token: BigInt(token),
    ...grantOf(capability),
  });
  const advanceBatch = (payload: Record<string, unknown>) =>
    sink.app.inject({ method: 'POST', url: '/v1/fences/advance-batch', payload, headers: bearer(COORDINATOR_KEY) });
  const write = (resource: string, token: string, capability: string) =>
    sink.app.inject({
      method: 'POST',
      url: '/v1/writes',
      payload: { resource, token, resultId: 'x', workerId: 'w', incarnation: INCARNATION, capability, payload: 1 },
    });
  const metric = async (line: RegExp) => {
    const text = (await sink.app.inject({ url: '/metrics' })).body;
    return Number(line.exec(text)?.[1] ?? 0);
  };

  it('a write carrying a capability the advance vouched for is accepted without that capability being verified', async () => {
    const grants = [vouchedGrant('a', '3', UNSIGNED), vouchedGrant('b', '4', sign('b', 4n, 'w'))];
    const res = await advanceBatch({
      items: [
        { resource: 'a', token: '3', grant: grantOf(UNSIGNED) },
        { resource: 'c', token: '9' },
        { resource: 'b', token: '4', grant: grantOf(sign('b', 4n, 'w')) },
      ],
      vouch: signVouch(CAPABILITY_KEY, grants),
    });
    expect(res.statusCode).toBe(200);
    expect((await write('a', '3', UNSIGNED)).json()).toMatchObject({ outcome: 'written' });
    expect((await write('b', '4', sign('b', 4n, 'w'))).json()).toMatchObject({ outcome: 'written' });
    // The same string for another resource or token is not vouched for.
    expect((await write('c', '9', UNSIGNED)).statusCode).toBe(403);
    expect(await metric(/leasehold_sink_vouched_grants_total\{result="accepted"\} (\d+)/)).toBe(2);
    expect(await metric(/leasehold_sink_capability_checks_total\{result="vouched"\} (\d+)/)).toBe(2);
    expect(await metric(/leasehold_sink_capability_checks_total\{result="verified"\} (\d+)/)).toBe(0);
    expect(await metric(/leasehold_sink_capability_checks_total\{result="refused"\} (\d+)/)).toBe(1);
  });

  it('a vouch that does not verify is ignored: the advance still happens, the writes verify their capabilities', async () => {
    const res = await advanceBatch({
      items: [{ resource: 'a', token: '3', grant: grantOf(UNSIGNED) }],
      // Over other grants than the items name.
      vouch: signVouch(CAPABILITY_KEY, [vouchedGrant('a', '4', UNSIGNED)]),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ results: [{ ok: true, outcome: 'advanced', fence: '3' }] });
    expect((await write('a', '3', UNSIGNED)).statusCode).toBe(403);
    expect((await write('a', '3', sign('a', 3n, 'w'))).json()).toMatchObject({ outcome: 'written' });
    expect(await metric(/leasehold_sink_vouched_grants_total\{result="invalid"\} (\d+)/)).toBe(1);
  });

  it('a full batch of 1000 grants with ids of the longest kind fits the default body limit (1 MiB) and the JSON limits', async () => {
    const big = await openInjectSink({ bodyLimitBytes: 1024 * 1024 });
    try {
      const ids = Array.from({ length: 1000 }, (_, i) => `${'r'.repeat(196)}${String(i).padStart(4, '0')}`);
      const worker = 'w'.repeat(200);
      const incarnation = 'i'.repeat(64);
      const token = '9'.repeat(18);
      const grants: VouchedGrant[] = ids.map((resource) => ({
        resource,
        token: BigInt(token),
        workerId: worker,
        incarnation,
        capability: sign(resource, BigInt(token), worker, incarnation),
      }));
      const payload = {
        items: grants.map((g) => ({
          resource: g.resource,
          token,
          grant: { workerId: worker, incarnation, capability: g.capability },
        })),
        vouch: signVouch(CAPABILITY_KEY, grants),
      };
      expect(JSON.stringify(payload).length).toBeGreaterThan(600_000);
      const res = await big.sink.app.inject({
        method: 'POST',
        url: '/v1/fences/advance-batch',
        payload,
        headers: bearer(COORDINATOR_KEY),
      });
      expect(res.statusCode).toBe(200);
      const text = (await big.sink.app.inject({ url: '/metrics' })).body;
      expect(text).toContain('leasehold_sink_vouched_grants_total{result="accepted"} 1000');
    } finally {
      await big.cleanup();
    }
  });

  it('grants without a vouch, or a vouch without grants, are INVALID_MESSAGE and advance nothing', async () => {
    const noVouch = await advanceBatch({ items: [{ resource: 'a', token: '3', grant: grantOf(UNSIGNED) }] });
    expect(noVouch.statusCode).toBe(400);
    expect(noVouch.json()).toMatchObject({ code: 'INVALID_MESSAGE' });
    const noGrants = await advanceBatch({
      items: [{ resource: 'a', token: '3' }],
      vouch: signVouch(CAPABILITY_KEY, []),
    });
    expect(noGrants.statusCode).toBe(400);
    const view = await sink.app.inject({ url: '/v1/resources/a', headers: bearer(COORDINATOR_KEY) });
    expect(view.json()).toMatchObject({ fence: '0' });
  });
});

describe('reads bounded by count and bytes', () => {
  const auth = bearer(COORDINATOR_KEY);

  async function writeMany(
    s: Sink,
    resource: string,
    token: bigint,
    items: readonly { id: string; payload: unknown }[],
  ) {
    const advance = await s.app.inject({
      method: 'POST',
      url: '/v1/fences/advance',
      payload: { resource, token: String(token) },
      headers: auth,
    });
    expect(advance.statusCode).toBe(200);
    for (let at = 0; at < items.length; at += 200) {
      const replies = await Promise.all(
        items.slice(at, at + 200).map((item) =>
          s.app.inject({
            method: 'POST',
            url: '/v1/writes',
            payload: {
              resource,
              token: String(token),
              resultId: item.id,
              workerId: 'w',
              incarnation: INCARNATION,
              capability: sign(resource, token, 'w'),
              payload: item.payload as never,
            },
          }),
        ),
      );
      expect(replies.filter((r) => r.statusCode !== 200).map((r) => r.body)).toEqual([]);
    }
  }

  it('1009 results of 8 KiB (8 MB) come in pages of at most 1000 results and 4 MiB, each result once', async () => {
    const { sink, cleanup } = await openInjectSink();
    try {
      const items = Array.from({ length: 1009 }, (_, i) => ({
        id: `task:${i}`,
        payload: { n: i, pad: 'p'.repeat(8000) },
      }));
      await writeMany(sink, 'big/r', 3n, items);
      const seen: string[] = [];
      const sizes: number[] = [];
      let query = '';
      for (;;) {
        const res = await sink.app.inject({ url: `/v1/resources/big%2Fr${query}`, headers: auth });
        expect(res.statusCode).toBe(200);
        const page = res.json<{ fence: string; results: { resultId: string }[]; next: string; hasMore: boolean }>();
        expect(page.fence).toBe('3');
        expect(page.results.length).toBeLessThanOrEqual(1000);
        sizes.push(res.rawPayload.length);
        seen.push(...page.results.map((r) => r.resultId));
        if (!page.hasMore) break;
        query = `?after=${page.next}`;
      }
      expect(sizes.length).toBeGreaterThanOrEqual(2);
      for (const size of sizes) expect(size).toBeLessThanOrEqual(4 * 1024 * 1024);
      expect(seen).toEqual(items.map((i) => i.id));
    } finally {
      await cleanup();
    }
  }, 60_000);

  it('decision pages stay within the page budget too; a walk still returns every decision once', async () => {
    const budget = 64 * 1024;
    const { sink, cleanup } = await openInjectSink({ readPageMaxBytes: budget });
    try {
      // Long ids: ~750 bytes a decision, so 1000 of them would be ~750 kB.
      const resource = `r/${'a'.repeat(190)}`;
      const items = Array.from({ length: 300 }, (_, i) => ({
        id: `${String(i).padStart(4, '0')}-${'b'.repeat(190)}`,
        payload: i,
      }));
      await writeMany(sink, resource, 1n, items);
      const seqs: number[] = [];
      let after = 0;
      let pages = 0;
      for (;;) {
        const res = await sink.app.inject({ url: `/v1/decisions?after=${after}&limit=1000`, headers: auth });
        expect(res.statusCode).toBe(200);
        const page = res.json<{ decisions: { seq: number }[]; next: number }>();
        if (page.decisions.length === 0) break;
        pages++;
        expect(res.rawPayload.length).toBeLessThanOrEqual(budget);
        seqs.push(...page.decisions.map((d) => d.seq));
        expect(page.next).toBe(page.decisions.at(-1)?.seq);
        after = page.next;
      }
      expect(pages).toBeGreaterThanOrEqual(3);
      expect(seqs).toEqual(Array.from({ length: 301 }, (_, i) => i + 1));
    } finally {
      await cleanup();
    }
  });
});
